package admission_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	boltstore "github.com/hermesq/hermesq/plugins/storage/bbolt"
)

// BenchmarkDrainTurns drains b.N human inputs on bbolt, each a turn whose
// handler is `true`: the cost per turn beside BenchmarkExecTrue.
func BenchmarkDrainTurns(b *testing.B) {
	ctx := context.Background()
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatalf("no true binary: %v", err)
	}
	st, err := boltstore.Open(ctx, filepath.Join(b.TempDir(), "h.db"), backend.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	svc := &admission.Service{Store: st}
	if _, _, err := st.OpenSession(ctx, backend.OpenSessionRequest{ID: "t", Owner: "bench"}); err != nil {
		b.Fatal(err)
	}
	ins := make([]admission.Input, b.N)
	for i := range ins {
		ins[i] = admission.Input{Session: "t", Text: fmt.Sprintf("question %d", i), Principal: "bench"}
	}
	if _, err := svc.AdmitBatch(ctx, ins); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	rep, err := svc.Drain(ctx, "t", admission.DrainOptions{Principal: "bench", Handler: &admission.Handler{Argv: []string{truePath}}, NoExecuted: true})
	if err != nil {
		b.Fatal(err)
	}
	if rep.Turns != b.N {
		b.Fatalf("drained %d turns, want %d", rep.Turns, b.N)
	}
}

// BenchmarkExecTrue execs `true`: the floor of BenchmarkDrainTurns.
func BenchmarkExecTrue(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatalf("no true binary: %v", err)
	}
	for b.Loop() {
		if err := exec.Command(truePath).Run(); err != nil {
			b.Fatal(err)
		}
	}
}
