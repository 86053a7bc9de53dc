package sshagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// SessionBind is the one extension the agent accepts.
const SessionBind = "session-bind@openssh.com"

// errRefused is wrapped by every policy refusal.
var errRefused = errors.New("refused")

// binding is one session-bind@openssh.com a connection recorded: the host
// key the server proved it holds, for the SSH session with that id.
type binding struct {
	hostKey    ssh.PublicKey
	sessionID  []byte
	forwarding bool
}

// connAgent is the agent one connection talks to: the policy, the
// connection's bindings and its own connection to the real agent. Its
// methods are called from the connection's goroutine only, one at a time
// (serve), so its fields need no lock.
type connAgent struct {
	srv      *Server
	bindings []binding
	upConn   net.Conn
	up       agent.ExtendedAgent
}

var _ agent.ExtendedAgent = (*connAgent)(nil)

func (a *connAgent) close() {
	if a.upConn != nil {
		a.srv.dropUpstream(a.upConn)
	}
}

// upstream dials the real agent once per connection and sets a deadline
// for the next exchange.
func (a *connAgent) upstream() (agent.ExtendedAgent, error) {
	if a.up == nil {
		c, err := a.srv.dialUpstream()
		if err != nil {
			var se *os.SyscallError
			if errors.As(err, &se) {
				err = se.Err // no host path in the reason
			}
			return nil, fmt.Errorf("the user's agent is not reachable: %w", err)
		}
		a.upConn, a.up = c, agent.NewClient(c)
	}
	_ = a.upConn.SetDeadline(time.Now().Add(upstreamTimeout))
	return a.up, nil
}

// refuse records a refusal and returns it as an error.
func (a *connAgent) refuse(e Event) error {
	e.Allowed = false
	a.srv.record(e)
	return fmt.Errorf("%w: %s", errRefused, e.Reason)
}

// fail records an allowed operation the real agent did not do.
func (a *connAgent) fail(e Event, err error) error {
	e.Allowed, e.Failed, e.Reason = false, true, err.Error()
	a.srv.record(e)
	return err
}

func (a *connAgent) rate(e Event) error {
	if a.srv.lim.take() {
		return nil
	}
	e.Reason = fmt.Sprintf("rate limit: this session's agent forwards at most %d operations a minute (max_per_minute)", a.srv.p.MaxPerMinute)
	return a.refuse(e)
}

// listed reports whether the key with fingerprint fp is offered.
func (a *connAgent) listed(fp string) bool {
	return slices.Contains(a.srv.p.Keys, fp) || slices.Contains(a.srv.p.SignKeys, fp)
}

// List returns the real agent's keys that the policy names.
func (a *connAgent) List() ([]*agent.Key, error) {
	e := Event{Op: "list"}
	if err := a.rate(e); err != nil {
		return nil, err
	}
	up, err := a.upstream()
	if err != nil {
		return nil, a.fail(e, err)
	}
	keys, err := up.List()
	if err != nil {
		return nil, a.fail(e, err)
	}
	out := []*agent.Key{}
	var fps []string
	for _, k := range keys {
		if fp := ssh.FingerprintSHA256(k); a.listed(fp) {
			out = append(out, k)
			fps = append(fps, fp)
		}
	}
	e.Allowed, e.Key = true, strings.Join(fps, ",")
	a.srv.record(e)
	return out, nil
}

// Sign is SignWithFlags without flags.
func (a *connAgent) Sign(key ssh.PublicKey, data []byte) (*ssh.Signature, error) {
	return a.SignWithFlags(key, data, 0)
}

// SignWithFlags signs an SSHSIG request or an SSH user authentication that
// the policy permits, and refuses everything else.
func (a *connAgent) SignWithFlags(key ssh.PublicKey, data []byte, flags agent.SignatureFlags) (*ssh.Signature, error) {
	fp := ssh.FingerprintSHA256(key)
	e := Event{Op: "sign", Key: fp, Purpose: "unknown"}
	if !a.listed(fp) {
		e.Reason = "key " + fp + " is not offered by this session's agent"
		return nil, a.refuse(e)
	}
	if err := a.decide(&e, key, data); err != nil {
		return nil, err
	}
	if err := a.rate(e); err != nil {
		return nil, err
	}
	up, err := a.upstream()
	if err != nil {
		return nil, a.fail(e, err)
	}
	sig, err := up.SignWithFlags(key, data, flags)
	if err != nil {
		return nil, a.fail(e, err)
	}
	e.Allowed = true
	a.srv.record(e)
	return sig, nil
}

// decide classifies what data is and applies the policy to it; it fills
// e's purpose, namespace and host.
func (a *connAgent) decide(e *Event, key ssh.PublicKey, data []byte) error {
	p := &a.srv.p
	if ns, ok := parseSSHSIG(data); ok {
		e.Purpose, e.Namespace = "sshsig", ns
		switch {
		case !slices.Contains(p.SignKeys, e.Key):
			e.Reason = "key " + e.Key + " is not a signing key (sign_keys)"
		case !slices.Contains(p.Namespaces, ns):
			e.Reason = fmt.Sprintf("signature namespace %q is not allowed (namespaces: %s)", ns, strings.Join(p.Namespaces, ", "))
		default:
			return nil
		}
		return a.refuse(*e)
	}
	ua, ok := parseUserauth(data)
	if !ok {
		e.Reason = "not a signature this agent makes: only SSHSIG (commit signing) and SSH user authentication are signed"
		return a.refuse(*e)
	}
	e.Purpose = "userauth"
	if !slices.Contains(p.Keys, e.Key) {
		e.Reason = "key " + e.Key + " is a signing key only, not one for SSH logins (keys)"
		return a.refuse(*e)
	}
	if !bytes.Equal(ua.keyBlob, key.Marshal()) {
		e.Reason = "the authentication request names another key than the one asked to sign"
		return a.refuse(*e)
	}
	b, why := a.boundFor(ua)
	if b == nil {
		e.Reason = why
		return a.refuse(*e)
	}
	hostFP := ssh.FingerprintSHA256(b.hostKey)
	e.Host = hostFP
	names, err := hostNames(p.KnownHosts, b.hostKey, p.Candidates)
	if err != nil {
		e.Reason = fmt.Sprintf("host key %s: %v", hostFP, err)
		return a.refuse(*e)
	}
	if len(names) == 0 {
		e.Reason = fmt.Sprintf("host key %s is not in known_hosts for any host name: SSH logins go only to known, allowed hosts", hostFP)
		return a.refuse(*e)
	}
	var tried []string
	for _, n := range names {
		if p.HostAllowed == nil {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ok, _ := p.HostAllowed(ctx, n.Host, n.Port)
		cancel()
		if ok {
			e.Host = n.String()
			return nil
		}
		tried = append(tried, n.String())
	}
	if len(tried) > 6 {
		tried = append(tried[:6], "...")
	}
	e.Reason = fmt.Sprintf("host key %s belongs to %s, not on this session's allowlist", hostFP, strings.Join(tried, ", "))
	return a.refuse(*e)
}

// boundFor is the binding a user authentication may use: the connection's
// latest, not forwarded, for the same SSH session (and host key, for the
// host-bound method); else why not.
func (a *connAgent) boundFor(ua userauth) (*binding, string) {
	if len(a.bindings) == 0 {
		return nil, "this agent connection was not bound to a host key (session-bind@openssh.com, OpenSSH 8.9+): an SSH login is signed only for a host ssh has verified"
	}
	for _, b := range a.bindings {
		if b.forwarding {
			return nil, "this agent connection is forwarded (ssh -A): logins through a forwarded agent are not signed"
		}
	}
	b := &a.bindings[len(a.bindings)-1]
	if !bytes.Equal(b.sessionID, ua.sessionID) {
		return nil, "the authentication request is for another SSH session than the one this connection was bound to"
	}
	if ua.hostKey != nil && !bytes.Equal(ua.hostKey, b.hostKey.Marshal()) {
		return nil, "the authentication request names another host key than the bound one"
	}
	return b, ""
}

// Extension accepts session-bind@openssh.com, verified, and refuses every
// other extension.
func (a *connAgent) Extension(typ string, contents []byte) ([]byte, error) {
	if typ != SessionBind {
		a.refuse(Event{Op: "extension", Reason: fmt.Sprintf("extension %.64q is refused", typ)})
		return nil, agent.ErrExtensionUnsupported
	}
	e := Event{Op: "session-bind"}
	var msg struct {
		HostKey    []byte
		SessionID  []byte
		Signature  []byte
		Forwarding bool
	}
	if err := ssh.Unmarshal(contents, &msg); err != nil {
		e.Reason = "malformed session-bind request"
		return nil, a.refuse(e)
	}
	hk, err := ssh.ParsePublicKey(msg.HostKey)
	if err != nil {
		e.Reason = "session-bind: unreadable host key"
		return nil, a.refuse(e)
	}
	e.Host = ssh.FingerprintSHA256(hk)
	var sig ssh.Signature
	if err := ssh.Unmarshal(msg.Signature, &sig); err != nil || hk.Verify(msg.SessionID, &sig) != nil {
		e.Reason = "session-bind: the host key's signature of the session does not verify"
		return nil, a.refuse(e)
	}
	if len(a.bindings) >= maxBindings {
		e.Reason = fmt.Sprintf("session-bind: more than %d bindings on one connection", maxBindings)
		return nil, a.refuse(e)
	}
	a.bindings = append(a.bindings, binding{hostKey: hk, sessionID: msg.SessionID, forwarding: msg.Forwarding})
	if msg.Forwarding {
		e.Namespace = "forwarding"
	}
	// The real agent learns the binding too, so a destination constraint
	// the user put on a key (ssh-add -h) holds as it would without us; an
	// agent that does not know the extension is fine.
	if up, err := a.upstream(); err == nil {
		_, _ = up.Extension(SessionBind, contents)
	}
	e.Allowed = true
	a.srv.record(e)
	return nil, nil
}

// Add refuses: the session's agent holds no keys of its own.
func (a *connAgent) Add(agent.AddedKey) error {
	return a.refuse(Event{Op: "add", Reason: "adding keys to this session's agent is refused"})
}

// Remove refuses.
func (a *connAgent) Remove(key ssh.PublicKey) error {
	e := Event{Op: "remove", Reason: "removing keys from this session's agent is refused"}
	if key != nil {
		e.Key = ssh.FingerprintSHA256(key)
	}
	return a.refuse(e)
}

// RemoveAll refuses.
func (a *connAgent) RemoveAll() error {
	return a.refuse(Event{Op: "remove-all", Reason: "removing keys from this session's agent is refused"})
}

// Lock refuses.
func (a *connAgent) Lock([]byte) error {
	return a.refuse(Event{Op: "lock", Reason: "locking this session's agent is refused"})
}

// Unlock refuses.
func (a *connAgent) Unlock([]byte) error {
	return a.refuse(Event{Op: "unlock", Reason: "unlocking this session's agent is refused"})
}

// Signers refuses: no signer leaves the agent.
func (a *connAgent) Signers() ([]ssh.Signer, error) {
	return nil, fmt.Errorf("%w: no signers", errRefused)
}

// parseSSHSIG reads the namespace of an SSHSIG signed-data blob
// (OpenSSH's PROTOCOL.sshsig: "SSHSIG", namespace, reserved, hash
// algorithm, hash).
func parseSSHSIG(data []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(data, []byte("SSHSIG"))
	if !ok {
		return "", false
	}
	var msg struct {
		Namespace string
		Reserved  []byte
		HashAlg   string
		Hash      []byte
	}
	if err := ssh.Unmarshal(rest, &msg); err != nil {
		return "", false
	}
	return msg.Namespace, true
}

// userauth is what the agent reads of an SSH_MSG_USERAUTH_REQUEST to be
// signed (RFC 4252 section 7; OpenSSH's publickey-hostbound-v00).
type userauth struct {
	sessionID []byte
	keyBlob   []byte
	hostKey   []byte // the host-bound method's server host key, else nil
}

const (
	msgUserAuthRequest = 50
	methodPublicKey    = "publickey"
	methodHostBound    = "publickey-hostbound-v00@openssh.com"
)

func parseUserauth(data []byte) (userauth, bool) {
	var ua userauth
	r := reader(data)
	var ok bool
	if ua.sessionID, ok = r.str(); !ok || len(ua.sessionID) == 0 {
		return ua, false
	}
	if t, ok := r.byte(); !ok || t != msgUserAuthRequest {
		return ua, false
	}
	_, ok1 := r.str() // user
	_, ok2 := r.str() // service
	method, ok3 := r.str()
	has, ok4 := r.byte()
	_, ok5 := r.str() // algorithm
	ua.keyBlob, ok = r.str()
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok || has != 1 {
		return ua, false
	}
	switch string(method) {
	case methodPublicKey:
	case methodHostBound:
		if ua.hostKey, ok = r.str(); !ok {
			return ua, false
		}
	default:
		return ua, false
	}
	return ua, len(r) == 0
}

// reader reads SSH wire types.
type reader []byte

func (r *reader) byte() (byte, bool) {
	if len(*r) < 1 {
		return 0, false
	}
	b := (*r)[0]
	*r = (*r)[1:]
	return b, true
}

func (r *reader) str() ([]byte, bool) {
	if len(*r) < 4 {
		return nil, false
	}
	n := uint32((*r)[0])<<24 | uint32((*r)[1])<<16 | uint32((*r)[2])<<8 | uint32((*r)[3])
	if uint64(n) > uint64(len(*r)-4) {
		return nil, false
	}
	s := (*r)[4 : 4+n]
	*r = (*r)[4+n:]
	return s, true
}
