package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// FuzzBatchEmit: a batch's JSON result lines are the bytes printer.marshal
// (encoding/json) writes for the same result, whatever the admission holds.
func FuzzBatchEmit(f *testing.F) {
	for _, s := range []string{
		`{"id":"01a2","session":"s1","seq":1,"kind":"human","principal":"p","request_id":"r<1>&","identities":[],"payload":{"text":"x"},"status":"queued","admitted_at":"2031-01-02T03:04:05.123456789Z"}`,
		"{\"id\":\"a\u2028\",\"identities\":[\"w:1\",\"<w:2>\"],\"payload\":{\"text\":\"<b>\\u2029\xff\",\"n\":[1e21,1.5,-0]},\"error\":\"\\t\\u0001\"}",
		`{"payload":{ "a" : [ 1 , {"b":null} ] },"admitted_at":"2031-01-02T03:04:05+02:00"}`,
	} {
		f.Add([]byte(s), "admitted", "w:1", "<line>\u2028", false)
	}
	f.Fuzz(func(t *testing.T, data []byte, result, identity, message string, differs bool) {
		var a backend.Admission
		if json.Unmarshal(data, &a) != nil {
			return
		}
		r := backend.AdmitResult{Result: result, Admission: a, PayloadDiffers: differs,
			Identities: map[string]string{identity: result, "z" + identity: "duplicate"}}
		for _, v := range []any{
			admission.AdmitJSON(r),
			admission.AdmitJSON(backend.AdmitResult{Err: errors.New(message)}),
			batchError{Line: 7, Error: "invalid", Message: message},
		} {
			var out bytes.Buffer
			b := &batchRun{p: &printer{format: formatJSONL}, out: bufio.NewWriter(&out)}
			err := b.emit(v, nil)
			_ = b.out.Flush()
			std, serr := b.p.marshal(v, false)
			if (err == nil) != (serr == nil) || !bytes.Equal(out.Bytes(), std) {
				t.Fatalf("emit writes unlike encoding/json:\nemit %s (%v)\nstd  %s (%v)", out.Bytes(), err, std, serr)
			}
		}
	})
}
