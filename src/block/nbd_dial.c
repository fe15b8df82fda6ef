/* Connecting an NBD handle on a thread of its own (nbd_dial.h). The dial
 * is shared by its thread and its caller; whichever lets go of it last
 * frees it, and closes the handle if the caller did not take it. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "block/nbd_dial.h"

struct nbd_dial {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char *uri;
	struct nbd_handle *h;	/* until taken */
	char err[256];		/* once done, if the call failed */
	bool done, ok;
	unsigned int refs;
};

bool nbd_dial_resolves(const char *uri)
{
	return !strncmp(uri, "nbd://", 6) || !strncmp(uri, "nbds://", 7);
}

/* Lets go of dl, whose lock the caller holds. */
static void put(struct nbd_dial *dl)
{
	bool last = --dl->refs == 0;

	pthread_mutex_unlock(&dl->lock);
	if (!last)
		return;
	nbd_close(dl->h);
	pthread_cond_destroy(&dl->cond);
	pthread_mutex_destroy(&dl->lock);
	free(dl->uri);
	free(dl);
}

static void *run(void *arg)
{
	struct nbd_dial *dl = arg;
	char err[sizeof(dl->err)] = "";
	bool ok = nbd_aio_connect_uri(dl->h, dl->uri) == 0;

	if (!ok)	/* libnbd's error is this thread's */
		snprintf(err, sizeof(err), "%s", nbd_get_error() ? nbd_get_error() : "connect failed");
	pthread_mutex_lock(&dl->lock);
	dl->done = true;
	dl->ok = ok;
	memcpy(dl->err, err, sizeof(err));
	pthread_cond_broadcast(&dl->cond);
	put(dl);
	return NULL;
}

struct nbd_dial *nbd_dial_start(struct nbd_handle *h, const char *uri)
{
	struct nbd_dial *dl = calloc(1, sizeof(*dl));
	pthread_attr_t attr;
	pthread_t t;
	int ret;

	if (!dl || !(dl->uri = strdup(uri))) {
		free(dl);
		return NULL;
	}
	pthread_mutex_init(&dl->lock, NULL);
	pthread_cond_init(&dl->cond, NULL);
	dl->h = h;
	dl->refs = 2;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ret = pthread_create(&t, &attr, run, dl);
	pthread_attr_destroy(&attr);
	if (ret) {
		dl->h = NULL;	/* still the caller's */
		pthread_mutex_lock(&dl->lock);
		dl->refs = 1;
		put(dl);
		return NULL;
	}
	return dl;
}

bool nbd_dial_done(struct nbd_dial *dl)
{
	bool done;

	pthread_mutex_lock(&dl->lock);
	done = dl->done;
	pthread_mutex_unlock(&dl->lock);
	return done;
}

bool nbd_dial_wait(struct nbd_dial *dl, unsigned int secs)
{
	struct timespec ts;
	bool done;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += secs;
	pthread_mutex_lock(&dl->lock);
	while (!dl->done && pthread_cond_timedwait(&dl->cond, &dl->lock, &ts) != ETIMEDOUT)
		;
	done = dl->done;
	pthread_mutex_unlock(&dl->lock);
	return done;
}

int nbd_dial_take(struct nbd_dial *dl, struct nbd_handle **h, char *err, size_t errlen)
{
	int ret;

	pthread_mutex_lock(&dl->lock);
	*h = dl->h;
	dl->h = NULL;
	ret = dl->ok ? 0 : -1;
	if (!dl->ok)
		snprintf(err, errlen, "%s", dl->err);
	put(dl);
	return ret;
}

void nbd_dial_drop(struct nbd_dial *dl)
{
	pthread_mutex_lock(&dl->lock);
	put(dl);
}
