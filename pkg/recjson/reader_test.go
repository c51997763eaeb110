package recjson_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/hermesq/hermesq/pkg/recjson"
)

// FuzzRaw holds Raw to encoding/json: what it reads whole is one valid
// JSON value, returned byte for byte, and json.Unmarshal into a
// json.RawMessage gives the same bytes.
func FuzzRaw(f *testing.F) {
	for _, s := range []string{
		`{"text":"a<b>&\u2028","z":[1e21,-0,null,true,false,0.5E-3],"k":{"k":{}},"k":[]}`,
		`"\ud800\"\\\/\b\f\n\r\t"`, `-0.0e+0`, `01`, `1.`, `.5`, `1e`, `-`, `tru`, `nul`, `[1,]`, `{"a":1,}`,
		`{"a" :1}`, `[1 ]`, `"\x01"`, "\"\xff\"", `"\u12g4"`, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := recjson.New(data)
		raw := r.Raw()
		if !r.Done() {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("Raw read %q whole, which is not valid JSON", data)
		}
		if !bytes.Equal(raw, data) {
			t.Fatalf("Raw read %q as %q", data, raw)
		}
		var std json.RawMessage
		if err := json.Unmarshal(data, &std); err != nil || !bytes.Equal(std, raw) {
			t.Fatalf("json.Unmarshal of %q into a RawMessage: %q, %v", data, std, err)
		}
	})
}

// Objects take their own keys once each, in any order; arrays and nested
// objects read through Elements and Object; whatever else fails.
func TestReaderObjects(t *testing.T) {
	keys := []string{"a", "b", "c"}
	read := func(s string) (a string, b []string, c uint64, done bool) {
		r := recjson.New([]byte(s))
		r.Object(keys, func(key string) {
			switch key {
			case "a":
				a = r.Str()
			case "b":
				b = r.Strs()
			case "c":
				c = r.Uint(1000)
			}
		})
		return a, b, c, r.Done()
	}
	if a, b, c, ok := read(`{"c":7,"b":["x","y\n"],"a":"é"}`); !ok || a != "é" || len(b) != 2 || b[1] != "y\n" || c != 7 {
		t.Fatalf("got %q %q %d %v", a, b, c, ok)
	}
	if _, _, _, ok := read(`{}`); !ok {
		t.Fatal("the empty object failed")
	}
	for _, bad := range []string{`{"a":"x","a":"y"}`, `{"d":1}`, `{"A":"x"}`, `{"c":1001}`, `{"c":07}`, `{"c":-1}`,
		`{"a":"\u0041"}`, `{"a": "x"}`, `{"a":"x"} `, `{"a":"x"`, `{"b":[]`, `{"b":["x",]}`, `{"a":null}`, "{\"a\":\"\xff\"}", `[]`, ``} {
		if _, _, _, ok := read(bad); ok {
			t.Errorf("%q was read", bad)
		}
	}
}
