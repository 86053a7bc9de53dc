package config

import "testing"

// TestMemorySwitch: memory is on by default; --disable-memory and
// memory = false in a trusted layer turn it off; the project file may turn
// it off, never back on (docs/memory.md, "Memory").
func TestMemorySwitch(t *testing.T) {
	want := func(on bool) func(t *testing.T, e *testEnv, c *Config) {
		return func(t *testing.T, e *testEnv, c *Config) { equal(t, "Memory", c.Memory, on) }
	}
	runCases(t, []loadCase{
		{name: "default on", check: want(true)},
		{name: "flag off", flags: Flags{DisableMemory: true}, check: want(false)},
		{name: "global off", global: "memory = false", check: want(false)},
		{name: "config back on", global: "memory = false", configs: []string{"memory = true"}, check: want(true)},
		{name: "flag beats file", configs: []string{"memory = true"}, flags: Flags{DisableMemory: true}, check: want(false)},
		{name: "project off", project: "memory = false", check: want(false)},
		{name: "project keeps on", project: "memory = true", check: want(true)},
		{name: "project may not turn on", global: "memory = false", project: "memory = true", WantErr: "memory = true would turn on the memory the trusted layers turned off"},
		{name: "project may not turn on past the flag", flags: Flags{DisableMemory: true}, project: "memory = true", WantErr: "the project file may only turn it off"},
		{name: "not a bool", global: `memory = "no"`, WantErr: "toml"},
		{name: "memory tools by name", flags: Flags{Tools: "read_file,memory_view,memory_write"}, check: func(t *testing.T, e *testEnv, c *Config) {
			equal(t, "Tools", len(c.Tools), 3)
		}},
	})
}
