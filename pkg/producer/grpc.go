package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/hermesq/hermesq/pkg/producer/internal/producerpb"
)

// grpcPlugin joins a Producer to go-plugin's gRPC transport: the plugin
// serves impl, the host dispenses a client that implements Producer.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl Producer
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterProducerServer(s, &grpcServer{impl: p.impl})
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &grpcClient{c: pb.NewProducerClient(c)}, nil
}

// grpcServer runs in the plugin and calls its Producer.
type grpcServer struct {
	pb.UnimplementedProducerServer
	impl Producer
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
		if errors.Is(err, ErrUnknownClaim) {
			return nil, status.Errorf(codes.NotFound, "settle: %v", err)
		}
		return nil, status.Errorf(codes.Unavailable, "settle: %v", err)
	}
	return &pb.SettleResponse{}, nil
}

// grpcClient runs in the host and implements Producer over gRPC.
type grpcClient struct{ c pb.ProducerClient }

func (c *grpcClient) Poll(ctx context.Context, max int) ([]Offer, error) {
	resp, err := c.c.Poll(ctx, &pb.PollRequest{Max: int32(max)})
	if err != nil {
		return nil, rpcError("poll", err)
	}
	out := make([]Offer, len(resp.Offers))
	for i, o := range resp.Offers {
		out[i] = offerFromPB(o)
	}
	return out, nil
}

func (c *grpcClient) Settle(ctx context.Context, claim string, a Action, reason string) error {
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
// ErrUnknownClaim kept recognisable.
func rpcError(op string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	if st.Code() == codes.NotFound {
		return fmt.Errorf("%s: %s: %w", op, st.Message(), ErrUnknownClaim)
	}
	return fmt.Errorf("%s: %s (%s)", op, st.Message(), st.Code())
}

var actionToPB = map[Action]pb.Action{
	Complete: pb.Action_ACTION_COMPLETE,
	Release:  pb.Action_ACTION_RELEASE,
	Defer:    pb.Action_ACTION_DEFER,
	Drop:     pb.Action_ACTION_DROP,
}

var actionFromPB = map[pb.Action]Action{
	pb.Action_ACTION_COMPLETE: Complete,
	pb.Action_ACTION_RELEASE:  Release,
	pb.Action_ACTION_DEFER:    Defer,
	pb.Action_ACTION_DROP:     Drop,
}

func offerToPB(o Offer) *pb.Offer {
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

func offerFromPB(o *pb.Offer) Offer {
	out := Offer{
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
		part := Part{Identity: p.Identity, Text: p.Text}
		if len(p.Payload) > 0 {
			part.Payload = p.Payload
		}
		out.Parts = append(out.Parts, part)
	}
	return out
}
