package config

import (
	"fmt"
	"time"
)

// TerminalLimits bound a session's terminals (docs/terminals.md, "Terminals"); a zero
// field is the terminal package's default.
type TerminalLimits struct {
	Max        int           // terminals open at once per session
	Scrollback int           // unread output bytes kept per terminal
	Idle       time.Duration // unused this long, a terminal is closed
}

// fileTerminals is the [terminals] table.
type fileTerminals struct {
	Max             *int64 `toml:"max"`
	ScrollbackBytes *int64 `toml:"scrollback_bytes"`
	IdleTimeoutMs   *int64 `toml:"idle_timeout_ms"`
}

// Bounds on the terminal limits a layer or flag may set.
const (
	MaxTerminalsLimit      = 64
	MinTerminalScrollback  = 4 << 10
	MaxTerminalScrollback  = 64 << 20
	MinTerminalIdle        = time.Second
	MaxTerminalIdle        = 7 * 24 * time.Hour
	terminalsTable         = "terminals"
	terminalMaxName        = terminalsTable + ".max"
	terminalScrollbackName = terminalsTable + ".scrollback_bytes"
	terminalIdleName       = terminalsTable + ".idle_timeout_ms"
)

// checkTerminalLimits validates set fields, naming src in errors.
func checkTerminalLimits(t TerminalLimits, src [3]string) error {
	if t.Max != 0 && (t.Max < 1 || t.Max > MaxTerminalsLimit) {
		return fmt.Errorf("%s: %d is not between 1 and %d", src[0], t.Max, MaxTerminalsLimit)
	}
	if t.Scrollback != 0 && (t.Scrollback < MinTerminalScrollback || t.Scrollback > MaxTerminalScrollback) {
		return fmt.Errorf("%s: %d is not between %d and %d", src[1], t.Scrollback, MinTerminalScrollback, MaxTerminalScrollback)
	}
	if t.Idle != 0 && (t.Idle < MinTerminalIdle || t.Idle > MaxTerminalIdle) {
		return fmt.Errorf("%s: %s is not between %s and %s", src[2], t.Idle, MinTerminalIdle, MaxTerminalIdle)
	}
	return nil
}

// apply sets what the table sets; a project file (lowerOnly) may only
// lower a limit a trusted layer set, never raise one.
func (f fileTerminals) apply(c *TerminalLimits, lowerOnly bool) error {
	var t TerminalLimits
	if f.Max != nil {
		t.Max = int(*f.Max)
		if *f.Max == 0 {
			t.Max = -1
		}
	}
	if f.ScrollbackBytes != nil {
		t.Scrollback = int(*f.ScrollbackBytes)
		if *f.ScrollbackBytes == 0 {
			t.Scrollback = -1
		}
	}
	if f.IdleTimeoutMs != nil {
		t.Idle = time.Duration(*f.IdleTimeoutMs) * time.Millisecond
		if *f.IdleTimeoutMs == 0 {
			t.Idle = -1
		}
	}
	if err := checkTerminalLimits(t, [3]string{terminalMaxName, terminalScrollbackName, terminalIdleName}); err != nil {
		return err
	}
	raised := func(name string, v, cur int64) error {
		if lowerOnly && cur != 0 && v > cur {
			return fmt.Errorf("%s: %d is above the trusted %d; the project file may only lower it", name, v, cur)
		}
		return nil
	}
	if t.Max != 0 {
		if err := raised(terminalMaxName, int64(t.Max), int64(c.Max)); err != nil {
			return err
		}
		c.Max = t.Max
	}
	if t.Scrollback != 0 {
		if err := raised(terminalScrollbackName, int64(t.Scrollback), int64(c.Scrollback)); err != nil {
			return err
		}
		c.Scrollback = t.Scrollback
	}
	if t.Idle != 0 {
		if err := raised(terminalIdleName, t.Idle.Milliseconds(), c.Idle.Milliseconds()); err != nil {
			return err
		}
		c.Idle = t.Idle
	}
	return nil
}
