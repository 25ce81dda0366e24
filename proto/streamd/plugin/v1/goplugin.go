package pluginv1

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Handshake is the go-plugin handshake of the streamd native protocol, the
// same for the host (plugins/native) and plugins (sdk/go/native). The
// protocol version is negotiated from the versioned plugin sets.
func Handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		MagicCookieKey:   MagicCookieKey,
		MagicCookieValue: MagicCookieValue,
	}
}

// GRPCPlugin is the go-plugin plugin of this protocol version: the plugin
// side registers Impl, the host side gets a PluginClient.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl serves the plugin side; nil on the host side.
	Impl PluginServer
}

// GRPCServer implements plugin.GRPCPlugin.
func (g *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if g.Impl == nil {
		return errors.New("streamd native plugin: no server")
	}
	RegisterPluginServer(s, g.Impl)
	return nil
}

// GRPCClient implements plugin.GRPCPlugin.
func (g *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewPluginClient(c), nil
}
