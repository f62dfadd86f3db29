package devicetest_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/device"
	"github.com/atrium-dev/atrium/backend/device/devicetest"
	"github.com/atrium-dev/atrium/backend/gateway"
)

const gatewayID = "6a1f0c2d9e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a29"

// pendingGateway is a real gateway whose Authenticate hook verifies the
// device proof as the devices service does and admits a verified device
// as a pending pairing request; it records the client info it saw.
func pendingGateway(t *testing.T) (url string, seen func() []gateway.ClientInfo) {
	t.Helper()
	var mu sync.Mutex
	var clients []gateway.ClientInfo
	gw, err := gateway.New(gateway.Options{Token: "operator-token-0123456789abcdef", GatewayID: gatewayID,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Authenticate: func(_ context.Context, r *gateway.AuthRequest) (*gateway.AuthResult, error) {
			d := r.Params.Device
			key, err := device.DecodePublicKey(d.Algorithm, d.PublicKey)
			if err != nil {
				return nil, gateway.Errorf(gateway.CodeUnauthorized, "device key: %v", err)
			}
			sig, err := device.DecodeBase64(d.Signature)
			if err != nil {
				return nil, gateway.Errorf(gateway.CodeUnauthorized, "signature: %v", err)
			}
			id, err := device.VerifyConnect(device.Proof{ID: d.ID, Key: key, Signature: sig, SignedAt: d.SignedAt, Nonce: d.Nonce},
				device.Payload{Version: 2, ClientID: r.Params.Client.ID, Mode: r.Params.Client.Mode, Role: r.Params.Role,
					Scopes: r.Params.Scopes, Token: r.Params.Auth.DeviceToken},
				device.Expect{GatewayID: gatewayID, Nonce: r.Nonce, Now: r.Now})
			if err != nil {
				return nil, gateway.Errorf(gateway.CodeUnauthorized, "device signature refused: %v", err)
			}
			mu.Lock()
			clients = append(clients, r.Params.Client)
			mu.Unlock()
			return &gateway.AuthResult{Principal: gateway.Principal{Role: gateway.RoleUnpaired, Device: id}, Status: gateway.AuthPending, RequestID: "req-1"}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(gw.Handler())
	t.Cleanup(hs.Close)
	return "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws", func() []gateway.ClientInfo {
		mu.Lock()
		defer mu.Unlock()
		return append([]gateway.ClientInfo(nil), clients...)
	}
}

// TestDial: a key of each algorithm connects with its signed proof (the
// gateway verifies it and learns the key's device id), as Phone() unless
// the options say otherwise; the connection is closed when the test that
// dialled ends; a proof for another gateway is refused with the server's
// error.
func TestDial(t *testing.T) {
	url, seen := pendingGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var conns []*gateway.Client
	t.Run("dial", func(t *testing.T) {
		for _, c := range []struct {
			alg    device.Algorithm
			client gateway.ClientInfo
		}{{device.Ed25519, gateway.ClientInfo{}}, {device.ECDSAP256, devicetest.NodeHost()}} {
			key := devicetest.NewKey(t, c.alg)
			if key.Public().Alg != c.alg {
				t.Fatalf("NewKey(%s) made a %s key", c.alg, key.Public().Alg)
			}
			conn, err := devicetest.Dial(ctx, t, key, gateway.ClientOptions{URL: url, GatewayID: gatewayID, DeviceToken: "device-token-1",
				Role: gateway.RoleNode, Client: c.client})
			if err != nil {
				t.Fatalf("%s: %v", c.alg, err)
			}
			if au := conn.Auth(); au.DeviceID != key.Public().ID() || au.Status != gateway.AuthPending {
				t.Fatalf("%s: hello-ok auth %+v, want pending as %s", c.alg, au, key.Public().ID())
			}
			conns = append(conns, conn)
		}
	})
	if got := seen(); len(got) != 2 || got[0] != devicetest.Phone() || got[1] != devicetest.NodeHost() {
		t.Fatalf("the gateway saw the clients %+v, want Phone() then NodeHost()", got)
	}
	for i, c := range conns {
		select {
		case <-c.Done():
		case <-ctx.Done():
			t.Fatalf("connection %d still open after the test that dialled it ended", i)
		}
	}
	_, err := devicetest.Dial(ctx, t, devicetest.NewKey(t, device.Ed25519), gateway.ClientOptions{URL: url, DeviceToken: "device-token-1", Role: gateway.RoleNode,
		GatewayID: strings.Repeat("0", 64)})
	var ge *gateway.Error
	if !errors.As(err, &ge) || ge.Code != gateway.CodeUnauthorized || !strings.Contains(ge.Message, "signature") {
		t.Fatalf("a proof for another gateway: %v", err)
	}
}
