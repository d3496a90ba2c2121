package main

// Go's sysmon thread kept out of its deep sleep. With one P (-procs 1) the P goes idle between requests, and then
// sysmon (runtime/proc.go) parks on a note ("deep sleep"); the next syscall the picker makes (the request's socket
// read, the answer's write) wakes it (entersyscall → entersyscallWakeSysmon; exitsyscall likewise), and a wake from
// a syscall resets its delay to 20 µs: it sleeps 20 µs, finds the P idle again, and parks, to be woken by the next
// syscall. On a shared 2-core machine each of those wake-ups is a context switch that competes with Envoy for a core
// on the request's path. sysmon never deep-sleeps while GODEBUG schedtrace is set (it must print on time), so the
// program re-executes itself with schedtrace set to its largest period, 2^31 − 1 ms (about 25 days; the runtime
// prints a trace line to stderr once the monotonic clock, time since boot, passes a period: on a machine up for
// longer, one line at start and one every 25 days). sysmon then wakes at its idle pace, every 10 ms (100 wake-ups a
// second when nothing happens), whatever the requests do. Measured with dolphin bench epp against a second picker run with
// GODEBUG=schedtrace=0, alternated in the same rounds (4 runs, 2026-12-02): 1.9–2.3 context switches per request
// against 7.8–8.9, the added p99 lower in 7 of 8 comparisons, p50 unchanged within the noise (±0.15 ms);
// docs/gateway.md "What the picker path costs". GODEBUG with a schedtrace of its own (schedtrace=0: the runtime's
// default) is left as it is.

import (
	"os"
	"strings"
	"syscall"
)

const sysmonAwake = "schedtrace=2147483647"

// keepSysmonAwake re-executes the program with sysmonAwake in GODEBUG unless GODEBUG names a schedtrace; it returns
// when it does not (or cannot) re-execute.
func keepSysmonAwake() {
	env, again := awakeEnv(os.Environ())
	if !again {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	_ = syscall.Exec(exe, os.Args, env) // replaces this process (same pid); returns only when it failed
}

// awakeEnv is environ with sysmonAwake added to GODEBUG (its other settings kept), and whether that is a change:
// not when GODEBUG already names a schedtrace.
func awakeEnv(environ []string) ([]string, bool) {
	out := make([]string, 0, len(environ)+1)
	godebug := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			godebug = v
			continue
		}
		out = append(out, kv)
	}
	for _, setting := range strings.Split(godebug, ",") {
		if strings.HasPrefix(strings.TrimSpace(setting), "schedtrace=") {
			return environ, false
		}
	}
	if godebug != "" {
		godebug += ","
	}
	return append(out, "GODEBUG="+godebug+sysmonAwake), true
}
