package sshagent

import (
	"encoding/binary"
	"errors"
	"io"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// The agent protocol's message numbers (draft-miller-ssh-agent).
const (
	msgFailure           = 5
	msgSuccess           = 6
	msgRequestIdentities = 11
	msgIdentitiesAnswer  = 12
	msgSignRequest       = 13
	msgSignResponse      = 14
	msgAddIdentity       = 17
	msgRemoveIdentity    = 18
	msgRemoveAll         = 19
	msgAddSmartcard      = 20
	msgRemoveSmartcard   = 21
	msgLock              = 22
	msgUnlock            = 23
	msgAddIDConstrained  = 25
	msgAddSmartcardCons  = 26
	msgExtension         = 27
	msgExtensionFailure  = 28
	// The protocol 1 requests an old ssh-add may still send.
	msgV1RequestIdentities = 1
	msgV1RemoveAll         = 9
)

// serve answers the agent protocol on c with a until c fails or closes.
// It is its own loop rather than agent.ServeAgent, which logs every
// refused request through the log package: a refusal here is recorded
// (Policy.Record), not printed.
func serve(a agent.ExtendedAgent, c io.ReadWriter) {
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 || n > maxMessage {
			return
		}
		req := make([]byte, n)
		if _, err := io.ReadFull(c, req); err != nil {
			return
		}
		rep := answer(a, req)
		binary.BigEndian.PutUint32(hdr[:], uint32(len(rep)))
		if _, err := c.Write(append(hdr[:], rep...)); err != nil {
			return
		}
	}
}

var failure = []byte{msgFailure}

// answer is the reply to one request.
func answer(a agent.ExtendedAgent, req []byte) []byte {
	body := reader(req[1:])
	switch req[0] {
	case msgRequestIdentities:
		keys, err := a.List()
		if err != nil {
			return failure
		}
		out := []byte{msgIdentitiesAnswer}
		out = binary.BigEndian.AppendUint32(out, uint32(len(keys)))
		for _, k := range keys {
			out = appendString(out, k.Marshal())
			out = appendString(out, []byte(k.Comment))
		}
		return out
	case msgSignRequest:
		blob, ok1 := body.str()
		data, ok2 := body.str()
		if !ok1 || !ok2 || len(body) != 4 {
			return failure
		}
		key, err := ssh.ParsePublicKey(blob)
		if err != nil {
			return failure
		}
		sig, err := a.SignWithFlags(key, data, agent.SignatureFlags(binary.BigEndian.Uint32(body)))
		if err != nil {
			return failure
		}
		return appendString([]byte{msgSignResponse}, ssh.Marshal(sig))
	case msgAddIdentity, msgAddIDConstrained, msgAddSmartcard, msgAddSmartcardCons:
		return status(a.Add(agent.AddedKey{}))
	case msgRemoveIdentity, msgRemoveSmartcard:
		var key ssh.PublicKey
		if blob, ok := body.str(); ok {
			key, _ = ssh.ParsePublicKey(blob)
		}
		return status(a.Remove(key))
	case msgRemoveAll, msgV1RemoveAll:
		return status(a.RemoveAll())
	case msgLock:
		return status(a.Lock(nil))
	case msgUnlock:
		return status(a.Unlock(nil))
	case msgExtension:
		typ, ok := body.str()
		if !ok {
			return failure
		}
		res, err := a.Extension(string(typ), body)
		switch {
		case errors.Is(err, agent.ErrExtensionUnsupported):
			return failure
		case err != nil:
			return []byte{msgExtensionFailure}
		case len(res) == 0:
			return []byte{msgSuccess}
		}
		return res
	case msgV1RequestIdentities:
		return failure
	}
	if c, ok := a.(*connAgent); ok {
		c.refuse(Event{Op: "unknown", Reason: "unknown agent request"})
	}
	return failure
}

func status(err error) []byte {
	if err != nil {
		return failure
	}
	return []byte{msgSuccess}
}

func appendString(b, s []byte) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
}
