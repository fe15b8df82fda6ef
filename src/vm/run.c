/* `iovm run`: placeholder until the VMM core lands (issue 2). */
#include <stdio.h>

#include "commands.h"

int cmd_run(int argc, char **argv)
{
	fprintf(stderr, "iovm: run: not built yet\n");
	return 1;
}
