//go:build cgo && linux

package cenv

/*
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>

// xr_spawn starts path through libc's posix_spawn: stdin /dev/null, stdout
// and stderr on outfd (when >= 0), in a process group of its own when
// newgroup, with every signal unblocked and at its default action (the
// Go runtime's handlers and masks are no business of the child's).
static int xr_spawn(const char *path, char *const argv[], char *const envp[], int outfd, int newgroup, int *pid) {
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	int rc;
	pid_t p = 0;
	if ((rc = posix_spawn_file_actions_init(&fa)) != 0) return rc;
	if ((rc = posix_spawnattr_init(&at)) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return rc;
	}
	short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	if (newgroup) {
		flags |= POSIX_SPAWN_SETPGROUP;
		posix_spawnattr_setpgroup(&at, 0);
	}
	posix_spawnattr_setflags(&at, flags);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (outfd >= 0) {
		posix_spawn_file_actions_adddup2(&fa, outfd, 1);
		posix_spawn_file_actions_adddup2(&fa, outfd, 2);
	}
	rc = posix_spawn(&p, path, &fa, &at, argv, envp);
	*pid = (int)p;
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	return rc;
}
*/
import "C"

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// Spawn starts path with argv (argv[0] included) and env through libc's
// posix_spawn, its stdin /dev/null and its stdout and stderr on out (nil:
// this process's), in a process group of its own when newGroup, and
// returns it. Use it where libc must see the child being made: the Nsight
// launcher follows children only through its hooks on libc's fork and
// posix_spawn (UnderLauncher), and os/exec makes its system calls itself.
func Spawn(path string, argv, env []string, out *os.File, newGroup bool) (*os.Process, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	cargv, freeArgv := cStrings(argv)
	defer freeArgv()
	cenv, freeEnv := cStrings(env)
	defer freeEnv()
	fd := C.int(-1)
	if out != nil {
		fd = C.int(out.Fd())
	}
	group := C.int(0)
	if newGroup {
		group = 1
	}
	var pid C.int
	if rc := C.xr_spawn(cpath, cargv, cenv, fd, group, &pid); rc != 0 {
		return nil, fmt.Errorf("posix_spawn %s: %w", path, syscall.Errno(rc))
	}
	return os.FindProcess(int(pid))
}

// cStrings is ss as a NULL-terminated C array, and what frees it.
func cStrings(ss []string) (**C.char, func()) {
	arr := (*[1 << 20]*C.char)(C.malloc(C.size_t(len(ss)+1) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))[: len(ss)+1 : len(ss)+1]
	for i, s := range ss {
		arr[i] = C.CString(s)
	}
	arr[len(ss)] = nil
	return &arr[0], func() {
		for _, p := range arr[:len(ss)] {
			C.free(unsafe.Pointer(p))
		}
		C.free(unsafe.Pointer(&arr[0]))
	}
}
