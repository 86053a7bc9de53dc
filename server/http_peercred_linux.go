package server

import (
	"errors"
	"net/netip"
	"os"
	"time"
)

// peerCheck says whether this platform can identify a loopback peer.
const peerCheck = true

// lookupPeerSocket finds the socket at the other end of a TCP connection
// in this network namespace's tables (/proc/self/net is the server's own
// namespace, where a loopback peer must live).
func lookupPeerSocket(local, remote netip.AddrPort) (tcpSocket, error) {
	// The tables are read in pages, and a socket opened or closed
	// meanwhile can make the kernel's walk skip a live entry: a peer not
	// found is looked for again, a few times, before it is refused (a
	// refused client's request is lost: an elicitation's answer, say).
	var err error
	for try := range peerLookupTries {
		if try > 0 {
			time.Sleep(time.Duration(try) * time.Millisecond)
		}
		var s tcpSocket
		if s, err = lookupPeerSocketOnce(local, remote); !errors.Is(err, errPeerUnknown) || !remote.Addr().Unmap().IsLoopback() {
			return s, err // found, failed, or from another host (which has no entry)
		}
	}
	return tcpSocket{}, err
}

// peerLookupTries bounds the reads of the tables for one connection.
const peerLookupTries = 4

func lookupPeerSocketOnce(local, remote netip.AddrPort) (tcpSocket, error) {
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			if os.IsNotExist(err) {
				continue // no IPv6 in this kernel
			}
			return tcpSocket{}, err
		}
		socks, err := parseProcNetTCP(b)
		if err != nil {
			return tcpSocket{}, err
		}
		if s, ok := findPeer(socks, local, remote); ok {
			return s, nil
		}
	}
	return tcpSocket{}, errPeerUnknown
}
