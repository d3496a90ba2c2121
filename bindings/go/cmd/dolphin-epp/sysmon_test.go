package main

import (
	"slices"
	"testing"
)

func TestAwakeEnv(t *testing.T) {
	for _, c := range []struct {
		in    []string
		out   []string
		again bool
	}{
		{[]string{"PATH=/bin"}, []string{"PATH=/bin", "GODEBUG=" + sysmonAwake}, true},
		{[]string{"GODEBUG=gctrace=1", "HOME=/"}, []string{"HOME=/", "GODEBUG=gctrace=1," + sysmonAwake}, true},
		{[]string{"GODEBUG="}, []string{"GODEBUG=" + sysmonAwake}, true},
		// a schedtrace of the user's own (0: the runtime's default) is kept, and nothing re-executes
		{[]string{"GODEBUG=schedtrace=0"}, []string{"GODEBUG=schedtrace=0"}, false},
		{[]string{"GODEBUG=gctrace=1,schedtrace=1000"}, []string{"GODEBUG=gctrace=1,schedtrace=1000"}, false},
		// a re-executed program does not re-execute again
		{[]string{"GODEBUG=" + sysmonAwake}, []string{"GODEBUG=" + sysmonAwake}, false},
	} {
		out, again := awakeEnv(c.in)
		if again != c.again || !slices.Equal(out, c.out) {
			t.Errorf("awakeEnv(%q) = %q, %v; want %q, %v", c.in, out, again, c.out, c.again)
		}
	}
}
