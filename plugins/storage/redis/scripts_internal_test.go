package redis

import (
	"context"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/internal/redistest"
)

// allScripts is every script the store runs.
var allScripts = []*script{
	scriptOpenSession, scriptGetSession, scriptGrant, scriptRevoke, scriptAdmit, scriptClaim,
	scriptSettle, scriptSettleRun, scriptRequeue, scriptResolve, scriptCancel, scriptAcquireLease,
	scriptRenewLease, scriptReleaseLease, scriptAddViewer, scriptRemoveViewer, scriptCloseSession,
	scriptCompress, scriptSwitch, scriptImportSession, scriptImportTranscript, scriptImportMessage,
	scriptImportAdmission, scriptReleaseClaim, scriptSwapLookup, scriptCompact, scriptSettleClaim,
}

// Every script loads (its text is read on first use, so a missing or
// misnamed file would otherwise only show when the script first runs).
func TestScriptsLoad(t *testing.T) {
	sha := regexp.MustCompile(`^[0-9a-f]{40}$`)
	for _, sc := range allScripts {
		text := sc.load()
		if !sha.MatchString(text.hash) || len(text.src) == 0 {
			t.Errorf("script %s: hash %q, %d bytes of text", sc.name, text.hash, len(text.src))
		}
	}
}

// Every file of scripts/ is common.lua, a script of allScripts or a library
// one of them is composed with: a script the store runs is never left out
// of the tests below.
func TestScriptsCoverFiles(t *testing.T) {
	used := map[string]bool{"common": true}
	for _, sc := range allScripts {
		used[sc.name] = true
		for _, lib := range sc.libs {
			used[lib] = true
		}
	}
	files, err := fs.Glob(scriptFS, "scripts/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "scripts/"), ".lua")
		if !used[name] {
			t.Errorf("%s is neither a script of allScripts nor a library of one", f)
		}
	}
}

// Every script, exactly as composed, compiles on a real server (SCRIPT LOAD
// compiles it without running it) under the SHA-1 eval sends with EVALSHA,
// and calls only functions its composition defines before the call, or
// Lua's own: a syntax error or a library left out of a composition fails
// here, not at the script's first run.
func TestScriptsCompile(t *testing.T) {
	srv := redistest.Start(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Protocol: 2, DisableIdentity: true})
	defer c.Close()
	ctx := context.Background()
	for _, sc := range allScripts {
		text := sc.load()
		hash, err := c.ScriptLoad(ctx, text.src).Result()
		if err != nil {
			t.Errorf("script %s: SCRIPT LOAD: %v", sc.name, err)
			continue
		}
		if hash != text.hash {
			t.Errorf("script %s: the server names it %s, eval %s", sc.name, hash, text.hash)
		}
		for _, fn := range undefinedCalls(text.src) {
			t.Errorf("script %s calls %s, which it does not define before the call", sc.name, fn)
		}
	}
}

// luaGlobalFuncs are the functions of Lua's base library a script may call
// without defining them.
var luaGlobalFuncs = map[string]bool{
	"assert": true, "error": true, "getmetatable": true, "ipairs": true, "next": true,
	"pairs": true, "pcall": true, "rawget": true, "rawset": true, "select": true,
	"setmetatable": true, "tonumber": true, "tostring": true, "type": true, "unpack": true,
}

var (
	luaStringOrComment = regexp.MustCompile(`--[^\n]*|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"`)
	luaFuncDef         = regexp.MustCompile(`\bfunction\s+([A-Za-z_]\w*)\s*\(`)
	luaCall            = regexp.MustCompile(`(?:^|[^\w.:])([A-Za-z_]\w*)\s*\(`)
	luaKeywords        = map[string]bool{"and": true, "elseif": true, "function": true, "if": true,
		"in": true, "not": true, "or": true, "return": true, "until": true, "while": true}
)

// undefinedCalls lists, once each, the names src calls as functions (not
// methods or fields: redis.call) that no `function NAME(` before the call
// defines and that are not Lua's own.
func undefinedCalls(src string) []string {
	code := luaStringOrComment.ReplaceAllStringFunc(src, func(s string) string {
		return strings.Repeat(" ", len(s)) // keep every offset
	})
	defined := map[string]int{} // name → offset of its first definition
	for _, m := range luaFuncDef.FindAllStringSubmatchIndex(code, -1) {
		name := code[m[2]:m[3]]
		if _, ok := defined[name]; !ok {
			defined[name] = m[2]
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range luaCall.FindAllStringSubmatchIndex(code, -1) {
		name, at := code[m[2]:m[3]], m[2]
		if luaKeywords[name] || luaGlobalFuncs[name] || seen[name] {
			continue
		}
		if def, ok := defined[name]; ok && def <= at {
			continue // its definition, or a call after it
		}
		seen[name] = true
		out = append(out, name)
	}
	return out
}

// undefinedCalls finds what the test above relies on it to find.
func TestUndefinedCalls(t *testing.T) {
	src := "local function f(a) return g(a) end\n-- h(x) in a comment\nlocal s = 'k(1)'\n" +
		"return f(redis.call('GET', 'x')), tonumber(s), late()\nlocal function late() end\n"
	got := strings.Join(undefinedCalls(src), " ")
	if got != "g late" {
		t.Errorf("undefinedCalls = %q, want %q", got, "g late")
	}
	bare := loadScript("settle_claim").load() // without steps.lua
	if got := strings.Join(undefinedCalls(bare.src), " "); got != "settle claim" {
		t.Errorf("settle_claim without its library: undefinedCalls = %q, want %q", got, "settle claim")
	}
}
