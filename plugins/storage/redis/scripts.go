package redis

import (
	"context"
	"embed"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/pkg/backend"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// script is one Lua script of scripts/, with common.lua and its libs
// prepended (loadScript). Its text and SHA-1 are made on first use, not
// when the program starts: a command that never talks to Redis does not
// pay for them.
type script struct {
	name string
	libs []string
	load func() scriptText
}

type scriptText struct{ src, hash string }

// loadScript is scripts/name.lua with common.lua prepended and, after it,
// each of libs: files that only define functions (steps.lua: the settle and
// claim steps), so a step is written once and every script that runs it
// calls it (settle_claim.lua runs two in one atomic script).
func loadScript(name string, libs ...string) *script {
	return &script{name: name, libs: libs, load: sync.OnceValue(func() scriptText {
		var b strings.Builder
		for _, file := range append(append([]string{"common"}, libs...), name) {
			body, err := scriptFS.ReadFile("scripts/" + file + ".lua")
			if err != nil {
				panic(err)
			}
			b.Write(body)
			if len(body) > 0 && body[len(body)-1] != '\n' {
				b.WriteByte('\n') // the next file starts on a line of its own
			}
		}
		src := b.String()
		return scriptText{src: src, hash: goredis.NewScript(src).Hash()}
	})}
}

var (
	scriptOpenSession      = loadScript("open_session")
	scriptGetSession       = loadScript("get_session")
	scriptGrant            = loadScript("grant")
	scriptRevoke           = loadScript("revoke")
	scriptAdmit            = loadScript("admit")
	scriptClaim            = loadScript("claim", "steps")
	scriptSettle           = loadScript("settle", "steps")
	scriptSettleRun        = loadScript("settle_run")
	scriptSettleClaim      = loadScript("settle_claim", "steps")
	scriptRequeue          = loadScript("requeue")
	scriptResolve          = loadScript("resolve")
	scriptCancel           = loadScript("cancel")
	scriptAcquireLease     = loadScript("acquire_lease")
	scriptRenewLease       = loadScript("renew_lease")
	scriptReleaseLease     = loadScript("release_lease")
	scriptAddViewer        = loadScript("add_viewer")
	scriptRemoveViewer     = loadScript("remove_viewer")
	scriptCloseSession     = loadScript("close_session")
	scriptCompress         = loadScript("compress")
	scriptSwitch           = loadScript("switch")
	scriptImportSession    = loadScript("import_session")
	scriptImportTranscript = loadScript("import_transcript")
	scriptImportMessage    = loadScript("import_message")
	scriptImportAdmission  = loadScript("import_admission")
	scriptReleaseClaim     = loadScript("release_claim")
	scriptSwapLookup       = loadScript("swap_lookup")
	scriptCompact          = loadScript("compact")
)

// noRetryCmd marks a script call as not to be re-sent by the client after a
// network error: the script may have run, and running a state change twice
// is not the same as running it once. (MOVED/ASK redirects, which mean it
// did not run, are still followed.)
type noRetryCmd struct{ *goredis.Cmd }

func (noRetryCmd) NoRetry() bool { return true }

// eval runs sc with EVALSHA, falling back to EVAL when the server does not
// have it cached (NOSCRIPT: nothing ran). It returns the script's reply as
// a slice whose first element is the status code.
func (s *Store) eval(ctx context.Context, sc *script, keys []string, args ...any) ([]any, error) {
	run := func(verb, body string) (any, error) {
		cmdArgs := make([]any, 0, 3+len(keys)+len(args))
		cmdArgs = append(cmdArgs, verb, body, len(keys))
		for _, k := range keys {
			cmdArgs = append(cmdArgs, k)
		}
		cmdArgs = append(cmdArgs, args...)
		cmd := goredis.NewCmd(ctx, cmdArgs...)
		if len(keys) > 0 {
			cmd.SetFirstKeyPos(3)
		}
		_ = s.client.Process(ctx, noRetryCmd{cmd})
		return cmd.Result()
	}
	text := sc.load()
	v, err := run("evalsha", text.hash)
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		v, err = run("eval", text.src)
	}
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return nil, errInternalf("script %s: unexpected reply %T", sc.name, v)
	}
	return arr, nil
}

// status is the first element of a script reply.
func status(reply []any) string {
	s, _ := reply[0].(string)
	return s
}

// scriptErr maps a script's status code to the contract's errors.
func (s *Store) scriptErr(r []any, op, what string) error {
	code := status(r)
	detail := ""
	if len(r) > 1 {
		detail = str(r[1])
	}
	switch code {
	case "ok", "created", "exists":
		return nil
	case "not_found":
		return backend.Errorf(backend.ErrNotFound, "redis: %s %s", op, what)
	case "no_transcript":
		return backend.Errorf(backend.ErrNotFound, "redis: %s %s: transcript %s", op, what, detail)
	case "forbidden":
		return backend.Errorf(backend.ErrForbidden, "redis: %s %s", op, what)
	case "conflict":
		if detail != "" {
			return backend.Errorf(backend.ErrConflict, "redis: %s %s (%s)", op, what, detail)
		}
		return backend.Errorf(backend.ErrConflict, "redis: %s %s", op, what)
	case "closed":
		return backend.Errorf(backend.ErrClosed, "redis: %s %s", op, what)
	case "busy":
		return backend.Errorf(backend.ErrBusy, "redis: %s %s", op, what)
	case "not_head":
		return backend.Errorf(backend.ErrNotHead, "redis: %s %s", op, what)
	case "watched":
		return backend.Errorf(backend.ErrWatched, "redis: %s %s", op, what)
	case "moved":
		return backend.Errorf(backend.ErrMoved, "redis: %s %s: the session's current transcript moved", op, what)
	case "fenced":
		return backend.Errorf(backend.ErrFenced, "redis: %s %s", op, what)
	case "held":
		return backend.Errorf(backend.ErrLeaseHeld, "redis: %s %s (holder %s)", op, what, detail)
	case "gap":
		return backend.Errorf(backend.ErrInvalid, "redis: %s %s: next message seq is %s", op, what, detail)
	}
	return errInternalf("%s %s: unknown script status %q", op, what, code)
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return itoa(x)
	}
	return ""
}
