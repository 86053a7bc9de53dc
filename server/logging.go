package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"time"

	"github.com/lmittmann/tint"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// The server's own diagnostics (start, sessions opening and closing, refused
// hooks, egress refusals, warnings) are slog records (docs/observability.md, "Logs"):
// tint-coloured text on a terminal, plain text elsewhere, or one JSON object
// a line with --log-format json. The startup line is not a record: it stays
// the first line on stderr, worded as ever.
//
// A session's own records also go to its MCP client as notifications/message
// once the client has asked for them with logging/setLevel, at that level or
// above; never another session's.

// NewLogger is the server's logger on w: format "text" (tint-coloured when
// color is set) or "json", at level and above.
func NewLogger(w io.Writer, format string, level slog.Level, color bool) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(tint.NewTextHandler(w, &tint.Options{
		Level:      level,
		NoColor:    !color,
		TimeFormat: time.TimeOnly,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.LevelKey && len(groups) == 0 {
				// Words, not three-letter codes: "evener-mcp: warning: ...".
				if l, ok := a.Value.Any().(slog.Level); ok && !color {
					return slog.String(a.Key, "evener-mcp: "+mcpLevel(l)+":")
				}
			}
			return a
		},
	}))
}

// ParseLevel reads --log-level: debug, info, warn (or warning), error.
func ParseLevel(s string) (slog.Level, bool) {
	switch s {
	case "debug":
		return slog.LevelDebug, true
	case "", "info":
		return slog.LevelInfo, true
	case "warn", "warning":
		return slog.LevelWarn, true
	case "error":
		return slog.LevelError, true
	}
	return 0, false
}

// mcpLevels are MCP's logging levels, lowest first, with the slog level
// each maps to.
var mcpLevels = []struct {
	name  mcp.LoggingLevel
	level slog.Level
}{
	{mcp.LoggingLevelDebug, slog.LevelDebug},
	{mcp.LoggingLevelInfo, slog.LevelInfo},
	{mcp.LoggingLevelNotice, slog.LevelInfo + 2},
	{mcp.LoggingLevelWarning, slog.LevelWarn},
	{mcp.LoggingLevelError, slog.LevelError},
	{mcp.LoggingLevelCritical, slog.LevelError + 4},
	{mcp.LoggingLevelAlert, slog.LevelError + 8},
	{mcp.LoggingLevelEmergency, slog.LevelError + 12},
}

// mcpLevel is the MCP level name of an slog level.
func mcpLevel(l slog.Level) string {
	name := mcpLevels[0].name
	for _, m := range mcpLevels {
		if l >= m.level {
			name = m.name
		}
	}
	return string(name)
}

// levelOf is the slog level of an MCP level name.
func levelOf(name string) (slog.Level, bool) {
	for _, m := range mcpLevels {
		if string(m.name) == name {
			return m.level, true
		}
	}
	return 0, false
}

// clientLevelOff means the client has not asked for log messages.
const clientLevelOff = int64(1 << 40)

// sessionLog is the slog.Handler of one session's records: each goes to
// the server's handler (tagged with the session) and, at or above the
// level its client set, to that client as notifications/message.
type sessionLog struct {
	base  slog.Handler
	s     *Session
	attrs []slog.Attr
	group string
}

func (l *sessionLog) Enabled(ctx context.Context, lv slog.Level) bool {
	return l.base.Enabled(ctx, lv) || int64(lv) >= l.s.clientLevel.Load()
}

func (l *sessionLog) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if l.base.Enabled(ctx, r.Level) {
		err = l.base.Handle(ctx, r)
	}
	if int64(r.Level) >= l.s.clientLevel.Load() {
		l.s.sendLog(ctx, r, l.attrs)
	}
	return err
}

func (l *sessionLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &sessionLog{base: l.base.WithAttrs(as), s: l.s, attrs: append(append([]slog.Attr(nil), l.attrs...), as...), group: l.group}
}

func (l *sessionLog) WithGroup(name string) slog.Handler {
	return &sessionLog{base: l.base.WithGroup(name), s: l.s, attrs: l.attrs, group: name}
}

// newSessionLogger is the logger of session s over the server's logger.
func newSessionLogger(base *slog.Logger, s *Session) *slog.Logger {
	return slog.New(&sessionLog{base: base.Handler().WithAttrs([]slog.Attr{slog.String("session", s.sb.ID)}), s: s})
}

// setClientLevel records the level the client asked for with
// logging/setLevel; an unknown name changes nothing.
func (s *Session) setClientLevel(name string) {
	if lv, ok := levelOf(name); ok {
		s.clientLevel.Store(int64(lv))
	}
}

// sendLog sends one record to the session's client. During a call (ctx
// carries the MCP session) it travels with the call's other notifications,
// ahead of its result; otherwise it goes out on the session's own channel
// (over HTTP, the client's GET stream when one is open).
func (s *Session) sendLog(ctx context.Context, r slog.Record, attrs []slog.Attr) {
	data := map[string]any{"message": r.Message}
	add := func(a slog.Attr) bool {
		if a.Key != "session" {
			data[a.Key] = a.Value.Resolve().Any()
		}
		return true
	}
	for _, a := range attrs {
		add(a)
	}
	r.Attrs(add)
	if b, err := json.Marshal(data); err != nil || len(b) > 64<<10 {
		data = map[string]any{"message": r.Message}
	}
	params := map[string]any{"level": mcpLevel(r.Level), "logger": "evener-mcp", "data": data}
	if mcpserver.ClientSessionFromContext(ctx) != nil {
		s.notifyCall(ctx, string(mcp.MethodNotificationMessage), params)
		return
	}
	s.notifyClient(string(mcp.MethodNotificationMessage), params)
}
