package plugin

import (
	"context"
	"errors"
	"fmt"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/hermesq/hermesq/pkg/producer"
	pb "github.com/hermesq/hermesq/pkg/producer/internal/producerpb"
)

// oldPlugin serves impl as a plugin built before SettleBatch does.
type oldPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	impl producer.Producer
}

type oldServer struct {
	pb.UnimplementedProducerServer
	s *grpcServer
}

func (o *oldServer) Poll(ctx context.Context, req *pb.PollRequest) (*pb.PollResponse, error) {
	return o.s.Poll(ctx, req)
}

func (o *oldServer) Settle(ctx context.Context, req *pb.SettleRequest) (*pb.SettleResponse, error) {
	return o.s.Settle(ctx, req)
}

func (p *oldPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterProducerServer(s, &oldServer{s: &grpcServer{impl: p.impl}})
	return nil
}

func (p *oldPlugin) GRPCClient(ctx context.Context, b *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return (&grpcPlugin{}).GRPCClient(ctx, b, c)
}

// settleOnly is a producer settling one claim at a time.
type settleOnly struct{ ob *producer.Outbox }

func (s settleOnly) Poll(ctx context.Context, req producer.PollRequest) ([]producer.Offer, error) {
	return s.ob.Poll(ctx, req)
}

func (s settleOnly) Settle(ctx context.Context, claim string, st producer.Settlement) error {
	return s.ob.Settle(ctx, claim, st)
}

// Settling a batch over gRPC, with a plugin that has SettleBatch (its
// producer settling all at once, or one at a time) and with one built
// before it: each claim is settled once, and each settle gets its own
// answer (an unknown claim, an unknown action), whatever the others'.
func TestSettleAllOverGRPC(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(*producer.Outbox) goplugin.Plugin
		batch bool // the plugin answers SettleBatch
	}{
		{"batch", func(ob *producer.Outbox) goplugin.Plugin { return &grpcPlugin{impl: ob} }, true},
		{"settle each", func(ob *producer.Outbox) goplugin.Plugin { return &grpcPlugin{impl: settleOnly{ob}} }, true},
		{"old plugin", func(ob *producer.Outbox) goplugin.Plugin { return &oldPlugin{impl: ob} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ob, err := producer.OpenOutbox(t.TempDir(), producer.OutboxOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var evs []producer.Event
			for i := range 6 {
				evs = append(evs, producer.Event{Session: "s1", Identity: fmt.Sprintf("e%d", i), Text: "t"})
			}
			if _, err := ob.AddAll(ctx, evs); err != nil {
				t.Fatal(err)
			}
			client, _ := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{Name: tc.serve(ob)})
			t.Cleanup(func() { _ = client.Close() })
			raw, err := client.Dispense(Name)
			if err != nil {
				t.Fatal(err)
			}
			p := raw.(*grpcClient)
			offers, err := p.Poll(ctx, producer.PollRequest{Max: 10})
			if err != nil || len(offers) != 6 {
				t.Fatalf("poll: %d offers, %v", len(offers), err)
			}
			settles := []producer.ClaimSettlement{
				{Claim: offers[0].Claim, Settlement: producer.Settlement{Action: producer.Complete}},
				{Claim: "nosuch", Settlement: producer.Settlement{Action: producer.Complete}},
				{Claim: offers[1].Claim, Settlement: producer.Settlement{Action: producer.Reject, Reason: "bad"}},
				{Claim: offers[2].Claim, Settlement: producer.Settlement{Action: producer.Action(99)}},
				{Claim: offers[3].Claim, Settlement: producer.Settlement{Action: producer.Complete}},
				{Claim: offers[3].Claim, Settlement: producer.Settlement{Action: producer.Complete}},
			}
			served := &producer.Served{}
			errs := p.SettleBatch(producer.WithServed(ctx, served), settles)
			if len(errs) != len(settles) {
				t.Fatalf("%d errors for %d settles", len(errs), len(settles))
			}
			// The same claim twice (4, 5): one settles it, the other finds
			// it unknown (which one, when they are made at once, is open).
			if errs[4] != nil && errs[5] == nil {
				errs[4], errs[5] = errs[5], errs[4]
			}
			for i, want := range []error{nil, producer.ErrUnknownClaim, nil, errors.New("unknown action"), nil, producer.ErrUnknownClaim} {
				switch {
				case want == nil && errs[i] != nil:
					t.Errorf("settle %d: %v", i, errs[i])
				case want != nil && errs[i] == nil:
					t.Errorf("settle %d: settled, want %v", i, want)
				case errors.Is(want, producer.ErrUnknownClaim) && !errors.Is(errs[i], producer.ErrUnknownClaim):
					t.Errorf("settle %d: %v, want an unknown claim", i, errs[i])
				}
			}
			if served.Total() <= 0 {
				t.Errorf("no time served reported")
			}
			if got := p.noBatch.Load(); got == tc.batch {
				t.Errorf("settled with a Settle each: %v, want %v", got, !tc.batch)
			}
			es, err := ob.Entries(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"e0": producer.StateDelivered, "e1": producer.StateRejected, "e2": producer.StatePending,
				"e3": producer.StateDelivered, "e4": producer.StatePending, "e5": producer.StatePending}
			for _, e := range es {
				if e.State != want[e.Identity] {
					t.Errorf("%s: %s, want %s", e.Identity, e.State, want[e.Identity])
				}
			}
		})
	}
}
