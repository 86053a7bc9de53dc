package confine

import (
	"bufio"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLoopbackForwarder: the macOS session's two loopback ports each lead
// to their own bridge socket, both ways, and stop when closed.
func TestLoopbackForwarder(t *testing.T) {
	dir := t.TempDir()
	var socks []string
	for _, name := range []string{"http.sock", "socks.sock"} {
		sock := filepath.Join(dir, name)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					line, _ := bufio.NewReader(c).ReadString('\n')
					io.WriteString(c, name+":"+line)
				}()
			}
		}()
		socks = append(socks, sock)
	}
	f, err := newLoopbackForwarder(socks[0], socks[1])
	if err != nil {
		t.Fatal(err)
	}
	for port, want := range map[int]string{f.httpPort: "http.sock:hi\n", f.socksPort: "socks.sock:hi\n"} {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "hi\n")
		got, _ := io.ReadAll(c)
		c.Close()
		if string(got) != want {
			t.Errorf("port %d answered %q, want %q", port, got, want)
		}
	}
	f.Close()
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(f.httpPort)); err == nil {
		c.Close()
		t.Error("the forwarder still accepts after Close")
	}
}

func TestEgressEnvAt(t *testing.T) {
	b := EgressBridge{HTTPUser: "u", HTTPPassword: "p@ss", SOCKSUser: "s", SOCKSPassword: "q"}
	env := egressEnvAt(b, 40001, 40002, "/Applications/evener mcp/evener-mcp")
	if env["HTTPS_PROXY"] != "http://u:p%40ss@127.0.0.1:40001" || env["ALL_PROXY"] != "socks5h://s:q@127.0.0.1:40002" {
		t.Errorf("proxy URLs: %q %q", env["HTTPS_PROXY"], env["ALL_PROXY"])
	}
	if got := env["GIT_SSH_COMMAND"]; !strings.Contains(got, "ProxyCommand='/Applications/evener mcp/evener-mcp "+ConnectSubcmd+" %h %p'") {
		t.Errorf("GIT_SSH_COMMAND = %q", got)
	}
	for _, exe := range []string{"/a'b/evener-mcp", "/a%h/evener-mcp", "", "/a\"b", "/a\\b"} {
		if got, ok := egressEnvAt(b, 1, 2, exe)["GIT_SSH_COMMAND"]; ok {
			t.Errorf("connect helper %q: GIT_SSH_COMMAND = %q, want it left unset", exe, got)
		}
	}
	// The Linux relay's environment is unchanged.
	if got := egressEnv(b)["GIT_SSH_COMMAND"]; got != "ssh -o ProxyCommand='"+relayExe+" "+ConnectSubcmd+" %h %p'" {
		t.Errorf("egressEnv GIT_SSH_COMMAND = %q", got)
	}
}

// TestSocksReplyText: git over SSH tells the user a policy refusal (reply
// 2) apart from an allowed destination that could not be reached.
func TestSocksReplyText(t *testing.T) {
	if !strings.Contains(socksReplyText(2), "refused") {
		t.Errorf("reply 2: %q", socksReplyText(2))
	}
	for _, c := range []byte{3, 4, 5, 6} {
		if got := socksReplyText(c); !strings.HasPrefix(got, "allowed, but") {
			t.Errorf("reply %d reads as a refusal: %q", c, got)
		}
	}
}
