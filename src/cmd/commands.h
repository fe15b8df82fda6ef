/* The subcommands of the iovm binary; each returns the process exit status. */
#ifndef IOVM_COMMANDS_H
#define IOVM_COMMANDS_H

int cmd_run(int argc, char **argv);		/* src/cmd/run.c */
int cmd_9p_serve(int argc, char **argv);	/* src/cmd/p9_serve.c */
int cmd_vhost_user_blk(int argc, char **argv);	/* src/cmd/vhost_user.c */
int cmd_vhost_user_scsi(int argc, char **argv);	/* src/cmd/vhost_user.c */
int cmd_vhost_user_pci(int argc, char **argv);	/* src/cmd/vhost_user_pci.c */
int cmd_ctl(int argc, char **argv);		/* src/cmd/ctl.c */

#endif
