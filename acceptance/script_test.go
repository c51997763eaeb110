package acceptance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs every testdata/script/*.txtar through the real binary, once
// on the default bbolt store ($XDG_STATE_HOME=$WORK/state, HERMESQ_STORE
// unset) and once on Redis (HERMESQ_STORE set, a key prefix per script). The
// scripts never name the store under test.
func TestScripts(t *testing.T) {
	bin := hermesqBin(t)
	handlerBin(t)
	for _, s := range storeURLs(t) {
		t.Run(s.Name, func(t *testing.T) {
			var storeURL func() string
			if s.Name != "bbolt" {
				s.URL(t) // skips or fails here when the store cannot run
				storeURL = func() string { return s.URL(t) }
			}
			testscript.Run(t, scriptParams(filepath.Dir(bin), storeURL))
		})
	}
}

// scriptParams are the testscript parameters for one store: storeURL nil
// means the default store.
func scriptParams(binDir string, storeURL func() string) testscript.Params {
	return testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", binDir+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("XDG_STATE_HOME", filepath.Join(env.WorkDir, "state"))
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, "config"))
			env.Setenv("HERMESQ_EXAMPLE_LOG", filepath.Join(env.WorkDir, "handler.log"))
			if storeURL != nil {
				env.Setenv("HERMESQ_STORE", storeURL())
			}
			return nil
		},
		Cmds: scriptCmds,
	}
}

// scriptCmds are the custom commands of the scripts:
//
//	hq ARGS…             run hermesq; it must exit 0 (! hq: must not)
//	hqexit N ARGS…       run hermesq; it must exit N. For an error exit (not 0,
//	                     5, 6, 130, 143) stderr must be exactly one line:
//	                     "hermesq: error: …", or with -o json the JSON error
//	                     object; never a panic.
//	jq PATH WANT         the value at PATH of the JSON on the last stdout is
//	                     WANT (strings raw, other values as compact JSON)
//	jset VAR PATH        set $VAR to the value at PATH of the last stdout
//	repeat VAR N STR     set $VAR to STR repeated N times
//	bigline FILE SESSION N   write an NDJSON admit line to FILE whose text is
//	                     N bytes long
//
// PATH: dot-separated steps: a member name, an array index, # (length of an
// array, object or string), or [key=value] (the elements of an array whose
// member key renders as value). NDJSON stdout reads as an array.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"hq": func(ts *testscript.TestScript, neg bool, args []string) {
		err := ts.Exec("hermesq", args...)
		if neg {
			if err == nil {
				ts.Fatalf("hermesq %s: exit 0, want an error", strings.Join(args, " "))
			}
			return
		}
		if err != nil {
			ts.Fatalf("hermesq %s: %v", strings.Join(args, " "), err)
		}
	},
	"hqexit": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 1 {
			ts.Fatalf("usage: hqexit N ARGS…")
		}
		want, err := strconv.Atoi(args[0])
		if err != nil {
			ts.Fatalf("hqexit: bad code %q", args[0])
		}
		args = args[1:]
		code := exitCode(ts.Exec("hermesq", args...))
		if code < 0 {
			ts.Fatalf("hermesq %s: did not run", strings.Join(args, " "))
		}
		if code != want {
			ts.Fatalf("hermesq %s: exit %d, want %d", strings.Join(args, " "), code, want)
		}
		stderr := ts.ReadFile("stderr")
		if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
			ts.Fatalf("hermesq %s: panicked", strings.Join(args, " "))
		}
		switch want {
		case 0, 5, 6, 130, 143:
			return
		}
		if err := oneLineError(stderr, jsonOutput(args)); err != nil {
			ts.Fatalf("hermesq %s: %v", strings.Join(args, " "), err)
		}
	},
	"jq": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) != 2 {
			ts.Fatalf("usage: jq PATH WANT")
		}
		got, err := jsonPath(ts.ReadFile("stdout"), args[0])
		if err != nil {
			ts.Fatalf("jq %s: %v", args[0], err)
		}
		if neg {
			if got == args[1] {
				ts.Fatalf("jq %s: got %q, want anything else", args[0], got)
			}
			return
		}
		if got != args[1] {
			ts.Fatalf("jq %s: got %q, want %q", args[0], got, args[1])
		}
	},
	"jset": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: jset VAR PATH")
		}
		got, err := jsonPath(ts.ReadFile("stdout"), args[1])
		if err != nil {
			ts.Fatalf("jset %s: %v", args[1], err)
		}
		ts.Setenv(args[0], got)
	},
	"repeat": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 3 {
			ts.Fatalf("usage: repeat VAR N STR")
		}
		n, err := strconv.Atoi(args[1])
		if err != nil {
			ts.Fatalf("repeat: %v", err)
		}
		ts.Setenv(args[0], strings.Repeat(args[2], n))
	},
	"bigline": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 3 {
			ts.Fatalf("usage: bigline FILE SESSION N")
		}
		n, err := strconv.Atoi(args[2])
		if err != nil {
			ts.Fatalf("bigline: %v", err)
		}
		line, _ := json.Marshal(map[string]any{"session": args[1], "text": strings.Repeat("x", n)})
		ts.Check(os.WriteFile(ts.MkAbs(args[0]), append(line, '\n'), 0o600))
	},
}

// exitCode returns the exit code of a finished command's error, -1 when it
// did not run.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func jsonOutput(args []string) bool {
	for i, a := range args {
		if a == "--" {
			return false
		}
		if a == "-ojson" || a == "--output=json" || a == "-o=json" ||
			((a == "-o" || a == "--output") && i+1 < len(args) && args[i+1] == "json") {
			return true
		}
	}
	return false
}

// oneLineError checks the contract's error report on stderr: one line,
// "hermesq: error: <message>", or with -o json {"error":code,"message":…}.
func oneLineError(stderr string, asJSON bool) error {
	s := strings.TrimSuffix(stderr, "\n")
	if s == "" {
		return fmt.Errorf("stderr is empty, want one error line")
	}
	if strings.Contains(s, "\n") {
		return fmt.Errorf("stderr has %d lines, want one:\n%s", strings.Count(s, "\n")+1, stderr)
	}
	if !asJSON {
		if !strings.HasPrefix(s, "hermesq: error: ") || len(s) == len("hermesq: error: ") {
			return fmt.Errorf("stderr %q does not read \"hermesq: error: <message>\"", s)
		}
		return nil
	}
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(s), &e); err != nil || e.Error == "" || e.Message == "" {
		return fmt.Errorf("stderr %q is not {\"error\",\"message\"}", s)
	}
	return nil
}

// jsonPath evaluates path (see scriptCmds) on doc and renders the result.
func jsonPath(doc, path string) (string, error) {
	v, err := parseJSONDoc(doc)
	if err != nil {
		return "", err
	}
	v, err = walk(v, path)
	if err != nil {
		return "", err
	}
	return render(v), nil
}

func parseJSONDoc(doc string) (any, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("stdout is not JSON: %v", err)
	}
	var next any
	if dec.Decode(&next) == nil { // NDJSON: read every line as one array
		vs := []any{v, next}
		for {
			var w any
			if err := dec.Decode(&w); err != nil {
				break
			}
			vs = append(vs, w)
		}
		return vs, nil
	}
	return v, nil
}

func walk(v any, path string) (any, error) {
	for _, step := range splitPath(path) {
		switch {
		case step == "#":
			switch x := v.(type) {
			case []any:
				v = json.Number(strconv.Itoa(len(x)))
			case map[string]any:
				v = json.Number(strconv.Itoa(len(x)))
			case string:
				v = json.Number(strconv.Itoa(len(x)))
			default:
				return nil, fmt.Errorf("# of %s", render(v))
			}
		case strings.HasPrefix(step, "[") && strings.HasSuffix(step, "]"):
			k, want, ok := strings.Cut(step[1:len(step)-1], "=")
			arr, isArr := v.([]any)
			if !ok || !isArr {
				return nil, fmt.Errorf("filter %s on %s", step, abbrev(render(v)))
			}
			out := []any{}
			for _, e := range arr {
				if m, ok := e.(map[string]any); ok && render(m[k]) == want {
					out = append(out, e)
				}
			}
			v = out
		default:
			switch x := v.(type) {
			case map[string]any:
				e, ok := x[step]
				if !ok {
					return nil, fmt.Errorf("no member %q in %s", step, abbrev(render(v)))
				}
				v = e
			case []any:
				i, err := strconv.Atoi(step)
				if err != nil || i < 0 || i >= len(x) {
					return nil, fmt.Errorf("no element %q in an array of %d", step, len(x))
				}
				v = x[i]
			default:
				return nil, fmt.Errorf("step %q into %s", step, abbrev(render(v)))
			}
		}
	}
	return v, nil
}

// splitPath splits ".a.[k=v].0" into steps, keeping dots inside [ ].
func splitPath(path string) []string {
	var steps []string
	var cur strings.Builder
	depth := 0
	for _, r := range path {
		switch {
		case r == '[':
			if depth == 0 && cur.Len() > 0 {
				steps = append(steps, cur.String())
				cur.Reset()
			}
			depth++
			cur.WriteRune(r)
		case r == ']':
			depth--
			cur.WriteRune(r)
		case r == '.' && depth == 0:
			if cur.Len() > 0 {
				steps = append(steps, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		steps = append(steps, cur.String())
	}
	return steps
}

func render(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "null"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

func abbrev(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
