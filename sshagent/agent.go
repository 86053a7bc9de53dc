// Package sshagent is a session's brokered SSH agent (docs/ssh-agent.md): an
// agent.ExtendedAgent served on a Unix socket of the session's own, which
// filters every request and forwards the permitted ones to the user's real
// agent, whose socket no sandbox reaches.
//
// It lists only the keys the configuration names; refuses adding,
// removing, locking, unlocking and every extension but
// session-bind@openssh.com, which it verifies and records per connection;
// signs an SSHSIG request (ssh-keygen -Y sign, git commit -S with
// gpg.format = ssh) only with a signing key and a configured namespace; and
// signs an SSH user-authentication request only on a connection that ssh
// bound to a host key which known_hosts maps to a host name the session's
// egress allowlist admits. Every operation is reported (Policy.Record); a
// rate limit bounds what reaches the real agent.
//
// It imports nothing of this module: the session hands it the allowlist's
// decision as a function.
package sshagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Policy is what a session's agent permits.
type Policy struct {
	// Keys are the SHA256 fingerprints ("SHA256:...") listed and usable
	// for SSH user authentication.
	Keys []string
	// SignKeys are the fingerprints listed and usable for SSHSIG
	// signatures, only in Namespaces.
	SignKeys   []string
	Namespaces []string
	// Upstream is the path of the user's real agent socket.
	Upstream string
	// KnownHosts is the user's known_hosts file: which host names a host
	// key belongs to.
	KnownHosts string
	// MaxPerMinute bounds the operations forwarded to the real agent
	// (listings and signatures) per minute; 0 is DefaultMaxPerMinute.
	MaxPerMinute int
	// HostAllowed says whether the session's egress allowlist admits
	// host:port, with a reason; nil admits nothing.
	HostAllowed func(ctx context.Context, host string, port int) (bool, string)
	// Candidates are host:port pairs (the allowlist's literal names with a
	// port) tried against hashed known_hosts entries.
	Candidates []HostPort
	// Record receives every operation, allowed or not, on the
	// connection's goroutine before the client is answered. It must not
	// block for long.
	Record func(Event)
}

// HostPort is one host name and port.
type HostPort struct {
	Host string
	Port int
}

// Event is one agent operation as the audit log and the violations see it.
type Event struct {
	// Op is "list", "sign", "session-bind", "add", "remove", "remove-all",
	// "lock", "unlock", "extension", "connect" or "unknown".
	Op string
	// Key is the fingerprint of the key concerned, "" when none.
	Key string
	// Purpose is a signature's: "sshsig", "userauth" or "unknown".
	Purpose string
	// Namespace is an SSHSIG signature's namespace; Host the host name a
	// user authentication was allowed for, or the bound host key's
	// fingerprint.
	Namespace string
	Host      string
	// Allowed says the operation was forwarded; Failed that it was
	// allowed but the real agent did not do it (not a policy refusal).
	Allowed bool
	Failed  bool
	// Reason is one line saying why, for a refusal or a failure.
	Reason string
}

// Refused reports a policy refusal (a violation).
func (e Event) Refused() bool { return !e.Allowed && !e.Failed }

// Defaults and bounds.
const (
	DefaultMaxPerMinute = 60
	// MaxConns bounds the connections a session's agent serves at once.
	MaxConns = 16
	// maxMessage bounds one request, as OpenSSH's agent does (256 KiB).
	maxMessage = 256 << 10
	// maxBindings bounds the session bindings one connection records.
	maxBindings = 16
	// upstreamTimeout bounds one exchange with the real agent (it may ask
	// the user to confirm a key added with ssh-add -c).
	upstreamTimeout = 2 * time.Minute
	// SocketName is the socket's name in its directory.
	SocketName = "agent.sock"
)

// Server is one session's agent: a listener on its own socket.
type Server struct {
	p   Policy
	dir string
	ln  *net.UnixListener
	lim *limiter

	mu     sync.Mutex // guards conns, ups and closed
	conns  map[net.Conn]struct{}
	ups    map[net.Conn]struct{} // the connections to the real agent
	closed bool
	wg     sync.WaitGroup
}

// Listen makes a private directory (0700) under parent and serves the
// agent on SocketName in it.
func Listen(parent string, p Policy) (*Server, error) {
	if p.Upstream == "" {
		return nil, errors.New("ssh agent: no socket of the user's agent")
	}
	if p.MaxPerMinute <= 0 {
		p.MaxPerMinute = DefaultMaxPerMinute
	}
	dir, err := os.MkdirTemp(parent, "evener-agent-")
	if err != nil {
		return nil, fmt.Errorf("ssh agent: %w", err)
	}
	path := filepath.Join(dir, SocketName)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("ssh agent: %w", err)
	}
	s := &Server{p: p, dir: dir, ln: ln, lim: newLimiter(p.MaxPerMinute, time.Minute), conns: map[net.Conn]struct{}{}, ups: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Socket is the host path of the agent's socket.
func (s *Server) Socket() string { return filepath.Join(s.dir, SocketName) }

// Close stops the listener, ends every connection and removes the socket's
// directory.
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	// A request waiting on the real agent (a key added with ssh-add -c
	// waits for the user) ends too.
	for c := range s.ups {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return errors.Join(err, os.RemoveAll(s.dir))
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		s.mu.Lock()
		if s.closed || len(s.conns) >= MaxConns {
			full := !s.closed
			s.mu.Unlock()
			c.Close()
			if full {
				s.record(Event{Op: "connect", Reason: fmt.Sprintf("refused: this session's agent already serves %d connections", MaxConns)})
			}
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			a := &connAgent{srv: s}
			serve(a, c)
			a.close()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// dialUpstream connects to the real agent, tracked so that Close ends it.
func (s *Server) dialUpstream() (net.Conn, error) {
	c, err := net.DialTimeout("unix", s.p.Upstream, 5*time.Second)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil, errors.New("closed")
	}
	s.ups[c] = struct{}{}
	return c, nil
}

func (s *Server) dropUpstream(c net.Conn) {
	s.mu.Lock()
	delete(s.ups, c)
	s.mu.Unlock()
	c.Close()
}

func (s *Server) record(e Event) {
	if s.p.Record != nil {
		s.p.Record(e)
	}
}

// limiter is a token bucket: n operations per period, refilled evenly.
type limiter struct {
	mu     sync.Mutex // guards tokens and last
	n      float64
	per    time.Duration
	tokens float64
	last   time.Time
}

func newLimiter(n int, per time.Duration) *limiter {
	return &limiter{n: float64(n), per: per, tokens: float64(n), last: time.Now()}
}

// take spends one token, or reports that none is left.
func (l *limiter) take() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.tokens += now.Sub(l.last).Seconds() / l.per.Seconds() * l.n
	if l.tokens > l.n {
		l.tokens = l.n
	}
	l.last = now
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}
