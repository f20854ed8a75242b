/* agent_fs.h - the guest side of the vm driver's file verbs (agent_fs.c). */
#ifndef PISB_AGENT_FS_H
#define PISB_AGENT_FS_H

/* `pisb-agent fs VERB ARGS...` (argv from VERB on): the exit status. */
int agent_fs_main(int argc, char **argv);

#endif
