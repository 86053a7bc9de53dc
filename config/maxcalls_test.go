package config

import (
	"testing"

	"github.com/evener-dev/evener-mcp/confine"
)

// TestMaxConcurrentCalls: the per-session cap on spawning calls, its
// default, the trusted layers and the flag, and a project file that may
// only lower it.
func TestMaxConcurrentCalls(t *testing.T) {
	want := func(n int) func(t *testing.T, e *testEnv, c *Config) {
		return func(t *testing.T, e *testEnv, c *Config) { equal(t, "MaxConcurrentCalls", c.MaxConcurrentCalls, n) }
	}
	runCases(t, []loadCase{
		{name: "default", check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "MaxConcurrentCalls", c.MaxConcurrentCalls, DefaultMaxConcurrentCalls)
			// The default cap times the default procs stays well under a
			// typical pid_max (32768).
			if n := int64(c.MaxConcurrentCalls) * confine.DefaultLimits.Procs; n > 32768/2 {
				t.Errorf("default max_concurrent_calls x procs = %d, over half of 32768", n)
			}
		}},
		{name: "global", global: "max_concurrent_calls = 3", check: want(3)},
		{name: "flag wins", global: "max_concurrent_calls = 3", flags: Flags{MaxConcurrentCalls: 16}, check: want(16)},
		{name: "project lowers", global: "max_concurrent_calls = 4", project: "max_concurrent_calls = 2", check: want(2)},
		{name: "project may not raise", project: "max_concurrent_calls = 9", WantErr: "max_concurrent_calls: 9 is above the trusted 8"},
		{name: "zero", configs: []string{"max_concurrent_calls = 0"}, WantErr: "max_concurrent_calls: 0 is not between 1 and 1024"},
		{name: "huge flag", flags: Flags{MaxConcurrentCalls: 5000}, WantErr: "--max-concurrent-calls: 5000 is not between 1 and 1024"},
	})
}
