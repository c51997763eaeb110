package backend

import (
	"bytes"
	"testing"
	"time"
)

// FuzzAdmissionJSON holds Admission.MarshalJSON, appended by hand, to the
// bytes json.Marshal writes for the admission's shape: the same bytes, or
// both refusing (a time outside years 0-9999, a payload that is not JSON).
func FuzzAdmissionJSON(f *testing.F) {
	f.Add("01a23fd34521bc333fc23e252b38cea2", "s1", "human", "queued", "", "alice", "req-1", "", "", []byte(`{"text":"hi"}`),
		uint64(1), uint64(0), int64(1764806400), int64(123456789), 0, false)
	f.Add("id", "s<1>&", "automation", "done", "watch", "bob", "", "completion:a", "ci:\u2028b\xff", []byte(` { "text" : "a<b>&c\u2029" , "n":[1, 2.50e3] } `),
		uint64(1<<63), uint64(7), int64(-62135596800), int64(0), 3600, true)
	f.Add("\x00\x1f\"\\\b\f\n\r\t\x7f", "é", "", "", "", "", "", "", "", []byte(`not json`),
		uint64(0), uint64(0), int64(253402300799), int64(999999999), -60, false)
	f.Add("x", "y", "human", "running", "", "", "", "", "", []byte(``),
		uint64(2), uint64(3), int64(253402300800), int64(0), 0, false)
	f.Fuzz(func(t *testing.T, id, session, kind, status, producer, principal, requestID, ident1, ident2 string, payload []byte,
		seq, epoch uint64, sec, nsec int64, offset int, compacted bool) {
		at := time.Unix(sec, nsec).In(time.FixedZone("z", offset%(26*3600)))
		a := Admission{
			ID: id, Session: session, Seq: seq, Kind: Kind(kind), Producer: producer, Principal: principal,
			RequestID: requestID, Payload: payload, PinnedTarget: ident2, DeliveredTo: session,
			Status: Status(status), Outcome: Outcome(ident1), Mode: Mode(requestID), Epoch: epoch, Generation: seq ^ epoch,
			AdmittedAt: at, StartedAt: at.Add(time.Duration(nsec)), ReplayOf: principal, Error: producer,
			Compacted: compacted,
		}
		if ident1 != "" {
			a.Identities = append(a.Identities, ident1)
		}
		if ident2 != "" {
			a.Identities = append(a.Identities, ident2)
		}
		want, wantErr := a.marshalSlow()
		fast, ok := a.appendJSON(nil)
		if !ok {
			if wantErr == nil {
				t.Fatalf("the hand encoder gave up where json.Marshal writes\n%s", want)
			}
		} else if wantErr != nil || !bytes.Equal(fast, want) {
			t.Fatalf("hand encoder:\n%s\njson.Marshal (err %v):\n%s", fast, wantErr, want)
		}
		got, err := a.MarshalJSON()
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("MarshalJSON: %s (err %v)\njson.Marshal: %s (err %v)", got, err, want, wantErr)
		}
	})
}
