package plugin

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
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
	st, err := settlementFromPB(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
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

// SettleBatch settles each claim of the request, in one call to the
// producer when it is an Outbox (one transaction) or a
// producer.BatchSettler, else with a Settle each (see producer.SettleAll).
func (s *grpcServer) SettleBatch(ctx context.Context, req *pb.SettleBatchRequest) (*pb.SettleBatchResponse, error) {
	resp := &pb.SettleBatchResponse{Results: make([]*pb.SettleResult, len(req.Settles))}
	var settles []producer.ClaimSettlement
	var at []int // settles[k] answers req.Settles[at[k]]
	for i, r := range req.Settles {
		st, err := settlementFromPB(r)
		if err != nil {
			resp.Results[i] = &pb.SettleResult{Status: pb.SettleResult_STATUS_FAILED, Message: err.Error()}
			continue
		}
		settles = append(settles, producer.ClaimSettlement{Claim: r.Claim, Settlement: st})
		at = append(at, i)
	}
	t0 := time.Now()
	errs := producer.SettleAll(ctx, s.impl, settles)
	resp.ServedNanos = int64(time.Since(t0))
	for k, err := range errs {
		r := &pb.SettleResult{}
		switch {
		case err == nil:
		case errors.Is(err, producer.ErrUnknownClaim):
			r.Status, r.Message = pb.SettleResult_STATUS_UNKNOWN_CLAIM, err.Error()
		default:
			r.Status, r.Message = pb.SettleResult_STATUS_FAILED, err.Error()
		}
		resp.Results[at[k]] = r
	}
	return resp, nil
}

func settlementFromPB(req *pb.SettleRequest) (producer.Settlement, error) {
	a, ok := actionFromPB[req.Action]
	if !ok {
		return producer.Settlement{}, fmt.Errorf("settle: unknown action %v", req.Action)
	}
	st := producer.Settlement{Action: a, Reason: req.Reason, Delivered: req.Delivered}
	if req.NotBeforeUnixNano > 0 {
		st.NotBefore = time.Unix(0, req.NotBeforeUnixNano).UTC()
	}
	return st, nil
}

// grpcClient runs in the host and implements producer.Producer (and
// producer.BatchSettler) over gRPC.
type grpcClient struct {
	c pb.ProducerClient
	// noBatch: the plugin answered SettleBatch UNIMPLEMENTED (built
	// before it); its claims are settled with a Settle each.
	noBatch atomic.Bool
}

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
	req, err := settleToPB(claim, s)
	if err != nil {
		return err
	}
	resp, err := c.c.Settle(ctx, req)
	if err != nil {
		return rpcError(err)
	}
	addServed(ctx, resp.ServedNanos)
	return nil
}

// SettleBatch settles every claim in one SettleBatch call, or, with a
// plugin built before it, with a Settle each.
func (c *grpcClient) SettleBatch(ctx context.Context, settles []producer.ClaimSettlement) []error {
	if c.noBatch.Load() {
		return producer.SettleEach(ctx, c, settles)
	}
	errs := make([]error, len(settles))
	req := &pb.SettleBatchRequest{}
	var at []int // req.Settles[k] is settles[at[k]]
	for i, s := range settles {
		r, err := settleToPB(s.Claim, s.Settlement)
		if err != nil {
			errs[i] = err
			continue
		}
		req.Settles = append(req.Settles, r)
		at = append(at, i)
	}
	resp, err := c.c.SettleBatch(ctx, req)
	switch {
	case status.Code(err) == codes.Unimplemented:
		c.noBatch.Store(true)
		return producer.SettleEach(ctx, c, settles)
	case err == nil && len(resp.Results) != len(req.Settles):
		err = fmt.Errorf("settle batch: %d answers to %d settles", len(resp.Results), len(req.Settles))
	case err != nil:
		err = rpcError(err)
	}
	if err != nil {
		for _, i := range at {
			errs[i] = err
		}
		return errs
	}
	addServed(ctx, resp.ServedNanos)
	for k, r := range resp.Results {
		switch r.Status {
		case pb.SettleResult_STATUS_SETTLED:
		case pb.SettleResult_STATUS_UNKNOWN_CLAIM:
			errs[at[k]] = fmt.Errorf("%s: %w", r.Message, producer.ErrUnknownClaim)
		default:
			errs[at[k]] = errors.New(r.Message)
		}
	}
	return errs
}

func settleToPB(claim string, s producer.Settlement) (*pb.SettleRequest, error) {
	pa, ok := actionToPB[s.Action]
	if !ok {
		return nil, fmt.Errorf("unknown action %v", s.Action)
	}
	req := &pb.SettleRequest{Claim: claim, Action: pa, Reason: s.Reason, Delivered: s.Delivered}
	if !s.NotBefore.IsZero() {
		req.NotBeforeUnixNano = s.NotBefore.UnixNano()
	}
	return req, nil
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
