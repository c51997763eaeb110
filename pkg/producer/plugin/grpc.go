package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hermesq/hermesq/pkg/producer"
	pb "github.com/hermesq/hermesq/pkg/producer/internal/producerpb"
)

// grpcPlugin joins a producer.Producer to go-plugin's gRPC transport: the plugin
// serves impl, the host dispenses a client that implements producer.Producer.
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	impl producer.Producer
}

func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterProducerServer(s, &grpcServer{impl: p.impl})
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &grpcClient{c: pb.NewProducerClient(c)}, nil
}

// grpcServer runs in the plugin and calls its producer.Producer.
type grpcServer struct {
	pb.UnimplementedProducerServer
	impl producer.Producer
}

func (s *grpcServer) Poll(ctx context.Context, req *pb.PollRequest) (*pb.PollResponse, error) {
	if req.Max <= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "poll: max %d is not positive", req.Max)
	}
	t0 := time.Now()
	offers, err := s.impl.Poll(ctx, producer.PollRequest{Max: int(req.Max), PayloadLimit: int(req.PayloadLimit)})
	served := time.Since(t0)
	if errors.Is(err, producer.ErrPermanent) {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := &pb.PollResponse{Offers: make([]*pb.Offer, len(offers)), ServedNanos: int64(served)}
	for i, o := range offers {
		resp.Offers[i] = offerToPB(o)
	}
	return resp, nil
}

func (s *grpcServer) Settle(ctx context.Context, req *pb.SettleRequest) (*pb.SettleResponse, error) {
	a, ok := actionFromPB[req.Action]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "settle: unknown action %v", req.Action)
	}
	st := producer.Settlement{Action: a, Reason: req.Reason, Delivered: req.Delivered}
	if req.NotBeforeUnixNano > 0 {
		st.NotBefore = time.Unix(0, req.NotBeforeUnixNano).UTC()
	}
	t0 := time.Now()
	if err := s.impl.Settle(ctx, req.Claim, st); err != nil {
		if errors.Is(err, producer.ErrUnknownClaim) {
			return nil, status.Error(codes.NotFound, err.Error())
		}
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &pb.SettleResponse{ServedNanos: int64(time.Since(t0))}, nil
}

// grpcClient runs in the host and implements producer.Producer over gRPC.
type grpcClient struct{ c pb.ProducerClient }

func (c *grpcClient) Poll(ctx context.Context, req producer.PollRequest) ([]producer.Offer, error) {
	resp, err := c.c.Poll(ctx, &pb.PollRequest{Max: int32(req.Max), PayloadLimit: int64(req.PayloadLimit)})
	if err != nil {
		return nil, rpcError(err)
	}
	addServed(ctx, resp.ServedNanos)
	out := make([]producer.Offer, len(resp.Offers))
	for i, o := range resp.Offers {
		out[i] = offerFromPB(o)
	}
	return out, nil
}

func (c *grpcClient) Settle(ctx context.Context, claim string, s producer.Settlement) error {
	pa, ok := actionToPB[s.Action]
	if !ok {
		return fmt.Errorf("unknown action %v", s.Action)
	}
	req := &pb.SettleRequest{Claim: claim, Action: pa, Reason: s.Reason, Delivered: s.Delivered}
	if !s.NotBefore.IsZero() {
		req.NotBeforeUnixNano = s.NotBefore.UnixNano()
	}
	resp, err := c.c.Settle(ctx, req)
	if err != nil {
		return rpcError(err)
	}
	addServed(ctx, resp.ServedNanos)
	return nil
}

// addServed adds the time the plugin reports it served a call in to the
// producer.Served of the call's context, if any.
func addServed(ctx context.Context, nanos int64) {
	if s := producer.ServedFrom(ctx); s != nil && nanos > 0 {
		s.Add(time.Duration(nanos))
	}
}

// rpcError turns a gRPC status into the plugin's own message (the host
// names the call), with producer.ErrUnknownClaim, producer.ErrPermanent
// and a missed deadline (context.DeadlineExceeded) kept recognisable.
func rpcError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.NotFound:
		return fmt.Errorf("%s: %w", st.Message(), producer.ErrUnknownClaim)
	case codes.FailedPrecondition:
		return producer.Permanent(errors.New(st.Message()))
	case codes.DeadlineExceeded:
		return fmt.Errorf("%s: %w", st.Message(), context.DeadlineExceeded)
	case codes.Canceled:
		return fmt.Errorf("%s: %w", st.Message(), context.Canceled)
	case codes.Unavailable:
		return errors.New(st.Message())
	}
	return fmt.Errorf("%s (%s)", st.Message(), st.Code())
}

var actionToPB = map[producer.Action]pb.Action{
	producer.Complete: pb.Action_ACTION_COMPLETE,
	producer.Retry:    pb.Action_ACTION_RETRY,
	producer.Reject:   pb.Action_ACTION_REJECT,
}

var actionFromPB = map[pb.Action]producer.Action{
	pb.Action_ACTION_COMPLETE: producer.Complete,
	pb.Action_ACTION_RETRY:    producer.Retry,
	pb.Action_ACTION_REJECT:   producer.Reject,
}

func offerToPB(o producer.Offer) *pb.Offer {
	out := &pb.Offer{
		Session:    o.Session,
		Target:     o.Target,
		Identities: o.Identities,
		Text:       o.Text,
		Payload:    o.Payload,
		Claim:      o.Claim,
		Attempts:   int32(o.Attempts),
	}
	for _, p := range o.Parts {
		out.Parts = append(out.Parts, &pb.Part{Identity: p.Identity, Text: p.Text, Payload: p.Payload})
	}
	return out
}

func offerFromPB(o *pb.Offer) producer.Offer {
	out := producer.Offer{
		Session:    o.Session,
		Target:     o.Target,
		Identities: o.Identities,
		Text:       o.Text,
		Claim:      o.Claim,
		Attempts:   int(o.Attempts),
	}
	if len(o.Payload) > 0 {
		out.Payload = o.Payload
	}
	for _, p := range o.Parts {
		part := producer.Part{Identity: p.Identity, Text: p.Text}
		if len(p.Payload) > 0 {
			part.Payload = p.Payload
		}
		out.Parts = append(out.Parts, part)
	}
	return out
}
