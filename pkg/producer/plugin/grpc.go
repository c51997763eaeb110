package plugin

import (
	"context"
	"errors"
	"fmt"

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
	offers, err := s.impl.Poll(ctx, int(req.Max))
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "poll: %v", err)
	}
	resp := &pb.PollResponse{Offers: make([]*pb.Offer, len(offers))}
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
	if err := s.impl.Settle(ctx, req.Claim, a, req.Reason); err != nil {
		if errors.Is(err, producer.ErrUnknownClaim) {
			return nil, status.Errorf(codes.NotFound, "settle: %v", err)
		}
		return nil, status.Errorf(codes.Unavailable, "settle: %v", err)
	}
	return &pb.SettleResponse{}, nil
}

// grpcClient runs in the host and implements producer.Producer over gRPC.
type grpcClient struct{ c pb.ProducerClient }

func (c *grpcClient) Poll(ctx context.Context, max int) ([]producer.Offer, error) {
	resp, err := c.c.Poll(ctx, &pb.PollRequest{Max: int32(max)})
	if err != nil {
		return nil, rpcError("poll", err)
	}
	out := make([]producer.Offer, len(resp.Offers))
	for i, o := range resp.Offers {
		out[i] = offerFromPB(o)
	}
	return out, nil
}

func (c *grpcClient) Settle(ctx context.Context, claim string, a producer.Action, reason string) error {
	pa, ok := actionToPB[a]
	if !ok {
		return fmt.Errorf("settle: unknown action %v", a)
	}
	_, err := c.c.Settle(ctx, &pb.SettleRequest{Claim: claim, Action: pa, Reason: reason})
	if err != nil {
		return rpcError("settle", err)
	}
	return nil
}

// rpcError turns a gRPC status into the plugin's message, with
// producer.ErrUnknownClaim kept recognisable.
func rpcError(op string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	if st.Code() == codes.NotFound {
		return fmt.Errorf("%s: %s: %w", op, st.Message(), producer.ErrUnknownClaim)
	}
	return fmt.Errorf("%s: %s (%s)", op, st.Message(), st.Code())
}

var actionToPB = map[producer.Action]pb.Action{
	producer.Complete: pb.Action_ACTION_COMPLETE,
	producer.Release:  pb.Action_ACTION_RELEASE,
	producer.Defer:    pb.Action_ACTION_DEFER,
	producer.Drop:     pb.Action_ACTION_DROP,
}

var actionFromPB = map[pb.Action]producer.Action{
	pb.Action_ACTION_COMPLETE: producer.Complete,
	pb.Action_ACTION_RELEASE:  producer.Release,
	pb.Action_ACTION_DEFER:    producer.Defer,
	pb.Action_ACTION_DROP:     producer.Drop,
}

func offerToPB(o producer.Offer) *pb.Offer {
	out := &pb.Offer{
		Session:    o.Session,
		Target:     o.Target,
		Identities: o.Identities,
		Text:       o.Text,
		Payload:    o.Payload,
		Claim:      o.Claim,
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
