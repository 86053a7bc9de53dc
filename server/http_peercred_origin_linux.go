package server

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Never its own processes (docs/http.md): a downstream MCP server, a hook,
// a terminal or a command this server started runs as the server's user,
// and with the host's network (a downstream's default) or through the
// session's proxy allowed to reach loopback it could open a fresh session
// of its own on `serve`, escaping the narrowed one it runs in. So, for a
// peer whose socket is the server's uid, the process holding that socket
// (the other end's inode, from /proc/net/tcp) is found among the holders
// of /proc/*/fd, and the connection is refused when the holder is this
// server itself (its egress proxy dials for its sandboxes), one of its
// descendants (PPid in /proc/<pid>/stat), or lives in a user or pid
// namespace one of its descendants lives in (its sandboxes'). A socket
// whose holder cannot be found is refused: fail closed.
//
// Sandboxed processes keep the host uid, and bubblewrap sets no_new_privs,
// so none of them can own a socket of another uid: a peer socket of
// another allowed uid (root's, for a server of a user) needs no search.

// originCacheSize bounds the processes remembered as holders of allowed
// peers (a client opens its connections from one process, or a few).
const originCacheSize = 16

// maxOriginProcs bounds the process table one search reads.
const maxOriginProcs = 1 << 17

// procID names one process across pid reuse: its pid and start time.
type procID struct {
	pid   int
	start uint64
}

// procEntry is what /proc/<pid>/stat tells about one process.
type procEntry struct {
	ppid  int
	start uint64
	comm  string
}

// peerOrigin finds the process at the other end of a loopback connection
// and whether this server started it.
type peerOrigin struct {
	self int    // this server's pid
	euid uint32 // the uid of every socket this server's processes make
	proc string // procfs ("/proc")
	exe  fileID // this server's executable: another process of it is another evener-mcp server

	mu      sync.Mutex // guards clients
	clients []procID   // holders of allowed peers' sockets, most recent first
}

// newPeerOrigin is the origin check of a `serve` server (peerPolicy.origin).
func newPeerOrigin() func(tcpSocket) (string, error) {
	o := &peerOrigin{self: os.Getpid(), euid: uint32(os.Geteuid()), proc: "/proc"}
	o.exe, _ = o.exeOf(o.self)
	return o.check
}

// errHolderNotFound: no process this server can inspect holds the socket.
var errHolderNotFound = errors.New("the process holding the peer's socket was not found (it hides its descriptors, or is gone)")

// check is why the holder of s must be refused ("" when it need not). The
// first connection of a client process reads the process table (about
// 1-5 ms); later ones from the same process look at that process alone.
func (o *peerOrigin) check(s tcpSocket) (string, error) {
	if s.UID != o.euid {
		return "", nil // not a socket any process of this server can own
	}
	target := "socket:[" + strconv.FormatUint(s.Inode, 10) + "]"
	for _, c := range o.recent() {
		if e, err := o.stat(c.pid); err == nil && e.start == c.start {
			if held, _ := o.holds(c.pid, target); held {
				o.remember(c)
				return "", nil
			}
		}
	}
	// Twice: a holder that forked and exited between the listing of
	// /proc and the look at its descriptors left its child unlisted.
	var err error
	for range 2 {
		var why string
		var holder procID
		why, holder, err = o.search(target)
		if err == nil {
			if why == "" {
				o.remember(holder)
			}
			return why, nil
		}
		if !errors.Is(err, errHolderNotFound) {
			return "", err
		}
	}
	return "", err
}

// search reads the process table and every listed process's descriptors
// for target. It returns why a holder is refused, or an allowed holder.
func (o *peerOrigin) search(target string) (string, procID, error) {
	procs, err := o.table()
	if err != nil {
		return "", procID{}, err
	}
	desc := descendants(procs, o.self)
	// Its own processes first: the search ends at the first of them that
	// holds the socket.
	for pid := range desc {
		if held, _ := o.holds(pid, target); held {
			return o.ownWhy(pid, procs[pid]), procID{}, nil
		}
	}
	// Then the others, the most recently started first (a new client
	// process, like curl, is found at once), up to the first holder: a
	// second holder of the same socket outside the server's tree would
	// need the socket passed out of it, to a process outside that
	// accepts it.
	others := make([]int, 0, len(procs))
	for pid := range procs {
		if !desc[pid] {
			others = append(others, pid)
		}
	}
	slices.SortFunc(others, func(a, b int) int { return cmp.Compare(procs[b].start, procs[a].start) })
	var ours map[string]bool // the namespaces of its descendants, when needed
	for _, pid := range others {
		if held, _ := o.holds(pid, target); !held {
			continue
		}
		e := procs[pid]
		inSandbox, err := o.inOwnNamespace(pid, desc, &ours)
		if err != nil {
			return "", procID{}, err
		}
		if inSandbox {
			return fmt.Sprintf("held by pid %d (%s), in a sandbox of this server", pid, e.comm), procID{}, nil
		}
		if why := o.otherServer(pid, procs); why != "" {
			return why, procID{}, nil
		}
		return "", procID{pid: pid, start: e.start}, nil
	}
	return "", procID{}, errHolderNotFound
}

// fileID names an executable file by device and inode.
type fileID struct{ dev, ino uint64 }

// exeOf is the executable of pid; false when it cannot be read (another
// uid's process, a kernel thread, a process gone).
func (o *peerOrigin) exeOf(pid int) (fileID, bool) {
	var st unix.Stat_t
	if err := unix.Stat(o.proc+"/"+strconv.Itoa(pid)+"/exe", &st); err != nil {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, true
}

// maxOriginAncestry bounds the PPid chain one holder's check walks.
const maxOriginAncestry = 64

// otherServer is why a holder outside this server's tree is refused
// because another evener-mcp server started it (docs/http.md, "Never its
// own processes"): the holder or one of its ancestors runs this server's
// executable. Another server of the same user (the stdio server an agent
// host runs beside this one) confines its own sandboxes, downstreams and
// hooks, but none of them is a client of this one either.
func (o *peerOrigin) otherServer(pid int, procs map[int]procEntry) string {
	if o.exe == (fileID{}) {
		return ""
	}
	for p, n := pid, 0; p > 1 && n < maxOriginAncestry; n++ {
		if id, ok := o.exeOf(p); ok && id == o.exe {
			if p == pid {
				return fmt.Sprintf("held by pid %d (%s), another evener-mcp server", pid, procs[pid].comm)
			}
			return fmt.Sprintf("held by pid %d (%s), which another evener-mcp server (pid %d) started", pid, procs[pid].comm, p)
		}
		e, ok := procs[p]
		if !ok {
			break
		}
		p = e.ppid
	}
	return ""
}

// ownWhy names a holder that is this server or a descendant of it.
func (o *peerOrigin) ownWhy(pid int, e procEntry) string {
	if pid == o.self {
		return "held by this server itself (its egress proxy, dialing for a sandbox)"
	}
	return fmt.Sprintf("held by pid %d (%s), which this server started", pid, e.comm)
}

// descendants is self and every process whose PPid chain reaches it.
func descendants(procs map[int]procEntry, self int) map[int]bool {
	children := make(map[int][]int, len(procs))
	for pid, e := range procs {
		children[e.ppid] = append(children[e.ppid], pid)
	}
	out := map[int]bool{self: true}
	queue := []int{self}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !out[c] {
				out[c] = true
				queue = append(queue, c)
			}
		}
	}
	return out
}

// inOwnNamespace reports whether pid lives in a user or pid namespace that
// is not the server's own and that one of the server's descendants lives
// in. *ours is filled on first need: most holders share the server's
// namespaces, and then no descendant's are read.
func (o *peerOrigin) inOwnNamespace(pid int, desc map[int]bool, ours *map[string]bool) (bool, error) {
	mine := o.namespaces(o.self)
	if len(mine) != 2 {
		return false, errors.New("read this server's namespaces")
	}
	theirs := o.namespaces(pid)
	if len(theirs) != 2 {
		// A process of the server's uid whose namespaces cannot be read
		// cannot be told apart from a sandboxed one.
		return false, fmt.Errorf("read the namespaces of pid %d, which holds the peer's socket", pid)
	}
	if theirs[0] == mine[0] && theirs[1] == mine[1] {
		return false, nil
	}
	if *ours == nil {
		*ours = map[string]bool{}
		for d := range desc {
			for _, ns := range o.namespaces(d) {
				if ns != mine[0] && ns != mine[1] {
					(*ours)[ns] = true
				}
			}
		}
	}
	return (*ours)[theirs[0]] || (*ours)[theirs[1]], nil
}

// namespaces are pid's user and pid namespace links ("user:[...]",
// "pid:[...]"), fewer when unreadable.
func (o *peerOrigin) namespaces(pid int) []string {
	var out []string
	for _, ns := range []string{"user", "pid"} {
		l, err := os.Readlink(o.proc + "/" + strconv.Itoa(pid) + "/ns/" + ns)
		if err != nil {
			return out
		}
		out = append(out, l)
	}
	return out
}

// table reads every process's parent, start time and name.
func (o *peerOrigin) table() (map[int]procEntry, error) {
	d, err := os.Open(o.proc)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	procs := make(map[int]procEntry, len(names))
	for _, n := range names {
		if len(n) == 0 || n[0] < '0' || n[0] > '9' {
			continue
		}
		if len(procs) >= maxOriginProcs {
			return nil, errors.New("list processes: too many")
		}
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if e, err := o.stat(pid); err == nil {
			procs[pid] = e
		}
	}
	return procs, nil
}

// stat reads /proc/<pid>/stat: "pid (comm) state ppid ... starttime(22)".
func (o *peerOrigin) stat(pid int) (procEntry, error) {
	b, err := os.ReadFile(o.proc + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procEntry{}, err
	}
	return parseProcStat(b)
}

// parseProcStat parses one /proc/<pid>/stat; comm may hold spaces and
// parentheses, so the fields start after the last ')'.
func parseProcStat(b []byte) (procEntry, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return procEntry{}, errors.New("stat: no (comm)")
	}
	f := bytes.Fields(b[end+1:])
	// f[0] is field 3 (state): ppid is field 4, starttime field 22.
	if len(f) < 20 {
		return procEntry{}, errors.New("stat: too few fields")
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return procEntry{}, fmt.Errorf("stat: ppid %q", f[1])
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return procEntry{}, fmt.Errorf("stat: starttime %q", f[19])
	}
	return procEntry{ppid: ppid, start: start, comm: string(b[open+1 : end])}, nil
}

// holds reports whether one of pid's descriptors is target
// ("socket:[INODE]"). An unreadable descriptor table is an error.
func (o *peerOrigin) holds(pid int, target string) (bool, error) {
	fd, err := unix.Open(o.proc+"/"+strconv.Itoa(pid)+"/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	dir := os.NewFile(uintptr(fd), "fd")
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return false, err
	}
	var buf [64]byte
	for _, n := range names {
		k, err := unix.Readlinkat(fd, n, buf[:])
		if err == nil && k == len(target) && string(buf[:k]) == target {
			return true, nil
		}
	}
	return false, nil
}

// recent is a copy of the remembered holders.
func (o *peerOrigin) recent() []procID {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]procID(nil), o.clients...)
}

// remember puts c first among the remembered holders.
func (o *peerOrigin) remember(c procID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, x := range o.clients {
		if x == c {
			o.clients = append(o.clients[:i], o.clients[i+1:]...)
			break
		}
	}
	o.clients = append([]procID{c}, o.clients...)
	if len(o.clients) > originCacheSize {
		o.clients = o.clients[:originCacheSize]
	}
}
