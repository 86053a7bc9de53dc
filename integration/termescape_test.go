//go:build linux

package integration

import (
	"strings"
	"testing"
)

// TestShellTerminalEscapes: a command's OSC 52 (clipboard write), OSC 8
// (hidden link), screen clear, title change, cursor movement and 8-bit C1
// CSI never reach the client, in the result or in progress notifications;
// the text around them stays readable.
func TestShellTerminalEscapes(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, id runAs) {
		e := newEnv(t, id)
		m := e.mcp(t, "--sandbox", "workspace-write", "--sandbox-net", "off")
		// Output starts after 200 ms so that progress carries it too.
		cmd := `sleep 0.3; printf 'one\033]52;c;ZWNobyBwd25lZA==\007two\033]8;;https://evil.test/\033\\link\033]8;;\033\\\033[2J\033[Hthree\033]0;title\007\033[1Afour\302\2332Jfive\rsix\n'; sleep 0.3`
		r := m.call(t, "shell", map[string]any{"command": cmd})
		m.mu.Lock()
		streamed := strings.Join(m.progress, "")
		m.mu.Unlock()
		out, _ := structured(t, r)["output"].(string)
		for what, s := range map[string]string{"text": text(r), "output": out, "progress": streamed} {
			if strings.ContainsAny(s, "\x1b\x07\r\u009b\u009d\u009c") {
				t.Errorf("%s carries a control sequence: %q", what, s)
			}
			if !strings.Contains(s, "onetwolinkthreefourfive\nsix") {
				t.Errorf("%s lost the text: %q", what, s)
			}
		}
	})
}
