package sshagent

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// maxKnownHosts bounds what is read of the known_hosts file.
const maxKnownHosts = 16 << 20

// String is host:port, as ssh writes it in known_hosts for a port other
// than 22.
func (h HostPort) String() string {
	if h.Port == 22 {
		return h.Host
	}
	return net.JoinHostPort(h.Host, strconv.Itoa(h.Port))
}

// hostNames are the host names known_hosts gives key, read afresh (the
// user may add a host while a session runs): plain names and [name]:port
// entries, and those of candidates that match a hashed entry. Wildcard
// and negated patterns name no host and are not used. A key marked
// @revoked is an error.
func hostNames(path string, key ssh.PublicKey, candidates []HostPort) ([]HostPort, error) {
	if path == "" {
		return nil, errors.New("no known_hosts file is configured")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("known_hosts: %w", errors.Unwrap(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKnownHosts))
	if err != nil {
		return nil, fmt.Errorf("known_hosts: %w", err)
	}
	want := key.Marshal()
	var out []HostPort
	seen := map[HostPort]bool{}
	add := func(h HostPort) {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	for len(data) > 0 {
		marker, hosts, pk, _, rest, err := ssh.ParseKnownHosts(data)
		if err == io.EOF {
			break
		}
		if err != nil {
			// One bad line: skip it, as ssh does.
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			data = data[i+1:]
			continue
		}
		data = rest
		if !bytes.Equal(pk.Marshal(), want) {
			continue
		}
		switch marker {
		case "revoked":
			return nil, errors.New("the host key is marked @revoked in known_hosts")
		case "cert-authority":
			continue
		}
		for _, h := range hosts {
			switch {
			case strings.HasPrefix(h, "|1|"):
				for _, c := range candidates {
					if hashedMatch(h, knownhosts.Normalize(net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))) {
						add(c)
					}
				}
			case strings.ContainsAny(h, "*?!"):
			default:
				if hp, ok := parseHost(h); ok {
					add(hp)
				}
			}
		}
	}
	return out, nil
}

// parseHost reads "name" (port 22) or "[name]:port".
func parseHost(h string) (HostPort, bool) {
	if !strings.HasPrefix(h, "[") {
		return HostPort{Host: h, Port: 22}, h != ""
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		return HostPort{}, false
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || host == "" {
		return HostPort{}, false
	}
	return HostPort{Host: host, Port: n}, true
}

// hashedMatch checks a "|1|salt|hash" entry (HMAC-SHA1 of the normalized
// host under the salt, both base64) against host.
func hashedMatch(entry, host string) bool {
	parts := strings.Split(entry, "|")
	if len(parts) != 4 {
		return false
	}
	salt, err1 := base64.StdEncoding.DecodeString(parts[2])
	sum, err2 := base64.StdEncoding.DecodeString(parts[3])
	if err1 != nil || err2 != nil {
		return false
	}
	m := hmac.New(sha1.New, salt)
	m.Write([]byte(host))
	return hmac.Equal(m.Sum(nil), sum)
}
