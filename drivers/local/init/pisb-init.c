/* pisb-init - pid 1 of a local sandbox: reap, and obey the controller.
 *
 * The boot (drivers/local/ns.c) builds the sandbox in a fork of the
 * controller, then execs this small static program as its init, with the
 * controller's socket at fd 3.  A fork of the controller would keep a copy
 * of everything the controller had mapped and written (its heap, its
 * libraries' data) for as long as the sandbox lives; this holds a few
 * pages.  It links nothing of libpisb and reads nothing from the sandbox.
 *
 * The protocol on fd 3 (one byte each way): 'K' from the controller: SIGKILL
 * every other process of the pid namespace, reap them all, answer 'k'.  End
 * of file: the controller is gone, and the sandbox goes with it.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define CTL 3

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void on_chld(int s) { (void)s; }

int main(void)
{
	struct sigaction sa = { 0 };

	/* a SIGCHLD (when the controller left it unblocked) ends the poll;
	 * zombies are reaped every turn, at least once a second */
	sa.sa_handler = on_chld;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	/* exec'ed from an fd, the kernel names us after its number */
	prctl(PR_SET_NAME, "pisb-init");
	for (;;) {
		struct pollfd p = { CTL, POLLIN, 0 };
		char c;
		int r = poll(&p, 1, 1000);

		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (r < 0 && errno != EINTR)
			_exit(1);
		if (r <= 0)
			continue;
		ssize_t n = read(CTL, &c, 1);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			_exit(0); /* controller gone: the sandbox goes with it */
		if (n == 1 && c == 'K') {
			/* from pid 1, -1 means every other process in this pid ns */
			kill(-1, SIGKILL);
			for (int i = 0; i < 100000; i++) {
				pid_t w = waitpid(-1, NULL, 0);
				if (w < 0 && errno == ECHILD)
					break;
			}
			write_all(CTL, "k", 1);
		}
	}
}
