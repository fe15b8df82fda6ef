/* The client side of the vhost-user protocol, for the unit tests. */
#ifndef IOVM_TESTS_VCLIENT_H
#define IOVM_TESTS_VCLIENT_H

#include <stdbool.h>
#include <stdint.h>

/* Sends one message; errors are ignored (the server may have hung up). */
void send_msg(int fd, uint32_t req, uint32_t flags, const void *payload,
	      uint32_t size, const int *fds, unsigned int nfds);
void send_req(int fd, uint32_t req, const void *payload, uint32_t size);
/* Reads one reply to req; returns its payload size, or -1 at end of stream. */
int recv_reply(int fd, uint32_t req, void *payload, uint32_t max);
/* The same, also taking the one fd that came with the reply (-1: none). */
int recv_reply_fd(int fd, uint32_t req, void *payload, uint32_t max, int *rfd);
uint64_t get_u64(int fd, uint32_t req);
/* Sends with NEED_REPLY and returns the REPLY_ACK status. */
uint64_t send_ack(int fd, uint32_t req, const void *payload, uint32_t size,
		  const int *fds, unsigned int nfds);
/* True when the server has closed the connection. */
bool hung_up(int fd);

#endif
