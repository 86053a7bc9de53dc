package config

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// SSHAgent is the brokered per-session SSH agent (docs/ssh-agent.md), from
// trusted layers only. Keys are SHA256 fingerprints ("SHA256:...").
type SSHAgent struct {
	// Keys are listed and usable for SSH logins to allowed hosts.
	Keys []string
	// SignKeys are listed and usable for SSHSIG signatures (git commit -S)
	// in Namespaces.
	SignKeys   []string
	Namespaces []string
	// Socket is the user's real agent; KnownHosts maps host keys to names.
	Socket       string
	KnownHosts   string
	MaxPerMinute int
}

// fileSSHAgent is the [ssh_agent] table.
type fileSSHAgent struct {
	Keys         []string `toml:"keys"`
	SignKeys     []string `toml:"sign_keys"`
	Namespaces   []string `toml:"namespaces"`
	Socket       *string  `toml:"socket"`
	KnownHosts   *string  `toml:"known_hosts"`
	MaxPerMinute *int64   `toml:"max_per_minute"`
}

// Bounds and defaults of [ssh_agent].
const (
	DefaultSSHNamespace   = "git"
	DefaultSSHPerMinute   = 60
	MaxSSHPerMinute       = 10000
	maxPublicKeyFile      = 64 << 10
	sshAgentTable         = "ssh_agent"
	sshAgentDefaultKnown  = ".ssh/known_hosts"
	sshFingerprintPattern = `^SHA256:[A-Za-z0-9+/]{43}$`
)

var (
	sshFingerprint = regexp.MustCompile(sshFingerprintPattern)
	sshNamespace   = regexp.MustCompile(`^[A-Za-z0-9@._+-]{1,64}$`)
)

// sshAgent merges one trusted layer's [ssh_agent]: lists append,
// scalars override; base resolves relative paths.
func (m *merger) sshAgent(t *fileSSHAgent, base string) error {
	a := m.agent()
	for _, k := range t.Keys {
		fp, err := m.sshKey(k, base)
		if err != nil {
			return fmt.Errorf("%s.keys: %w", sshAgentTable, err)
		}
		a.Keys = appendNew(a.Keys, fp)
	}
	for _, k := range t.SignKeys {
		fp, err := m.sshKey(k, base)
		if err != nil {
			return fmt.Errorf("%s.sign_keys: %w", sshAgentTable, err)
		}
		a.SignKeys = appendNew(a.SignKeys, fp)
	}
	for _, ns := range t.Namespaces {
		if !sshNamespace.MatchString(ns) {
			return fmt.Errorf("%s.namespaces: %q is not a signature namespace", sshAgentTable, ns)
		}
		a.Namespaces = appendNew(a.Namespaces, ns)
	}
	if t.Socket != nil {
		p, err := m.path(*t.Socket, base)
		if err != nil {
			return fmt.Errorf("%s.socket: %w", sshAgentTable, err)
		}
		a.Socket = p
	}
	if t.KnownHosts != nil {
		p, err := m.path(*t.KnownHosts, base)
		if err != nil {
			return fmt.Errorf("%s.known_hosts: %w", sshAgentTable, err)
		}
		a.KnownHosts = p
	}
	if t.MaxPerMinute != nil {
		if *t.MaxPerMinute < 1 || *t.MaxPerMinute > MaxSSHPerMinute {
			return fmt.Errorf("%s.max_per_minute: %d is not between 1 and %d", sshAgentTable, *t.MaxPerMinute, MaxSSHPerMinute)
		}
		a.MaxPerMinute = int(*t.MaxPerMinute)
	}
	return nil
}

// sshAgentFlags applies --ssh-agent KEY: each key is offered for logins
// and for signing.
func (m *merger) sshAgentFlags(keys []string) error {
	for _, k := range keys {
		fp, err := m.sshKey(k, ".")
		if err != nil {
			return fmt.Errorf("--ssh-agent: %w", err)
		}
		a := m.agent()
		a.Keys = appendNew(a.Keys, fp)
		a.SignKeys = appendNew(a.SignKeys, fp)
	}
	return nil
}

func (m *merger) agent() *SSHAgent {
	if m.c.SSHAgent == nil {
		m.c.SSHAgent = &SSHAgent{}
	}
	return m.c.SSHAgent
}

// sshAgentDefaults completes the agent once the trusted layers are merged:
// the default namespace, the real agent's socket from SSH_AUTH_SOCK, the
// user's known_hosts, the rate.
func (m *merger) sshAgentDefaults(env []string) error {
	a := m.c.SSHAgent
	if a == nil {
		return nil
	}
	if len(a.Keys)+len(a.SignKeys) == 0 {
		return errors.New("ssh_agent: no key is named (keys, sign_keys or --ssh-agent KEY)")
	}
	if len(a.Namespaces) == 0 {
		a.Namespaces = []string{DefaultSSHNamespace}
	}
	if a.Socket == "" {
		s := lookupEnv(env, "SSH_AUTH_SOCK")
		if !filepath.IsAbs(s) {
			return errors.New("ssh_agent: no agent socket: set ssh_agent.socket, or run with SSH_AUTH_SOCK set")
		}
		a.Socket = filepath.Clean(s)
	}
	if a.KnownHosts == "" {
		if m.home == "" {
			return errors.New("ssh_agent: no known_hosts: set ssh_agent.known_hosts (HOME is unset)")
		}
		a.KnownHosts = filepath.Join(m.home, sshAgentDefaultKnown)
	}
	if a.MaxPerMinute == 0 {
		a.MaxPerMinute = DefaultSSHPerMinute
	}
	return nil
}

// sshKey is a key's SHA256 fingerprint: given as one, or read from a
// public-key file (authorized_keys form: "TYPE BASE64 [comment]").
func (m *merger) sshKey(k, base string) (string, error) {
	if strings.HasPrefix(k, "SHA256:") {
		if !sshFingerprint.MatchString(k) {
			return "", fmt.Errorf("%q is not a SHA256 fingerprint (ssh-keygen -lf KEY prints it)", k)
		}
		return k, nil
	}
	p, err := m.path(k, base)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("public key %s: %w", p, errors.Unwrap(err))
	}
	if len(data) > maxPublicKeyFile {
		return "", fmt.Errorf("public key %s: larger than %d bytes", p, maxPublicKeyFile)
	}
	fp, err := publicKeyFingerprint(string(data))
	if err != nil {
		return "", fmt.Errorf("public key %s: %w", p, err)
	}
	return fp, nil
}

// publicKeyFingerprint reads the first key line of an authorized_keys-form
// file and returns its fingerprint, as ssh-keygen -l prints it.
func publicKeyFingerprint(s string) (string, error) {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) < 2 {
			return "", errors.New("not a public key (want TYPE BASE64 [comment])")
		}
		if strings.Contains(f[0], "PRIVATE") || strings.HasPrefix(f[0], "-----") {
			return "", errors.New("this is a private key: name the .pub file")
		}
		blob, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil || len(blob) < 4 {
			return "", errors.New("not a public key (bad base64)")
		}
		n := binary.BigEndian.Uint32(blob)
		if uint64(n) > uint64(len(blob)-4) || string(blob[4:4+n]) != f[0] {
			return "", fmt.Errorf("not a public key (the key's type is not %q)", f[0])
		}
		sum := sha256.Sum256(blob)
		return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:]), nil
	}
	return "", errors.New("no public key in the file")
}
