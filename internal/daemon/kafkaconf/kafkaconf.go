package kafkaconf

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/x/tlsconf"
	"github.com/streamd/streamd/pipeline/kafka"
)

// Cluster returns the kafka.Cluster of a config cluster. It reads the TLS
// files now (so that lint reports them) and the secrets at each
// authentication; it warns on log about settings that weaken security
// (insecure_skip_verify, a password or token sent without TLS).
func Cluster(cc *config.KafkaCluster, log *slog.Logger) (*kafka.Cluster, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &kafka.Cluster{Name: cc.Name, Seeds: cc.Brokers, ClientID: cc.ClientID, Rack: cc.Rack, ReplicationFactor: int16(cc.ReplicationFactor)}
	if len(cc.TopicConfigs) > 0 {
		c.TopicConfigs = map[string]*string{}
		for k, v := range cc.TopicConfigs {
			c.TopicConfigs[k] = &v
		}
	}
	tlsOn := cc.TLS != nil && cc.TLS.Enabled
	if tlsOn {
		t := cc.TLS
		d, err := tlsconf.NewDialer(tlsconf.Files{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile,
			ServerName: t.ServerName, MinVersion: t.MinVersion, InsecureSkipVerify: t.InsecureSkipVerify})
		if err != nil {
			return nil, fmt.Errorf("%s.tls: %w", cc.At, err)
		}
		if t.InsecureSkipVerify {
			log.Warn("TLS certificate verification is OFF for this Kafka cluster (tls.insecure_skip_verify): anyone on the path can impersonate its brokers and read the credentials", "cluster", cc.Name, "brokers", cc.Brokers)
		}
		// The CA bundle and the client certificate are read again when
		// their files change: a rotation needs no restart.
		c.TLS, c.DialTLS = d.Config(), d.DialContext
	}
	if s := cc.SASL; s != nil {
		m, err := Mechanism(s)
		if err != nil {
			return nil, fmt.Errorf("%s.sasl: %w", cc.At, err)
		}
		c.SASL, c.SASLUser = m, s.Username
		if !tlsOn && (s.Mechanism == "PLAIN" || s.Mechanism == "OAUTHBEARER") {
			log.Warn("SASL "+s.Mechanism+" without TLS: the credentials cross the network in the clear (add tls)", "cluster", cc.Name, "brokers", cc.Brokers)
		}
	}
	return c, nil
}

// Mechanism returns the franz-go SASL mechanism of s.
func Mechanism(s *config.KafkaSASL) (sasl.Mechanism, error) {
	user := s.Username
	switch s.Mechanism {
	case "PLAIN":
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			pw, err := s.Password.Value()
			return plain.Auth{User: user, Pass: pw}, err
		}), nil
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		fn := func(context.Context) (scram.Auth, error) {
			pw, err := s.Password.Value()
			return scram.Auth{User: user, Pass: pw}, err
		}
		if s.Mechanism == "SCRAM-SHA-256" {
			return scram.Sha256(fn), nil
		}
		return scram.Sha512(fn), nil
	case "OAUTHBEARER":
		tok, err := tokenSource(s)
		if err != nil {
			return nil, err
		}
		ext := maps.Clone(s.Extensions)
		return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			t, err := tok(ctx)
			return oauth.Auth{Token: t, Extensions: ext}, err
		}), nil
	case "AWS_MSK_IAM":
		return aws.ManagedStreamingIAM(awsCredentials(s.AWSProfile)), nil
	}
	return nil, fmt.Errorf("unknown mechanism %q", s.Mechanism)
}

// tokenSource returns where an OAUTHBEARER token comes from.
func tokenSource(s *config.KafkaSASL) (func(context.Context) (string, error), error) {
	switch {
	case s.TokenFile != "":
		f := &tokenFile{path: s.TokenFile}
		return f.token, nil
	case s.TokenURL != "":
		secret, err := s.ClientSecret.Value()
		if err != nil {
			return nil, err
		}
		cc := &clientcredentials.Config{ClientID: s.ClientID, ClientSecret: secret, TokenURL: s.TokenURL, Scopes: s.Scopes,
			AuthStyle: oauth2.AuthStyleInHeader}
		return (&clientCreds{cfg: cc, secret: s.ClientSecret}).token, nil
	}
	return func(context.Context) (string, error) { return s.Token.Value() }, nil
}

// tokenFile is a token read again whenever its file changes (a sidecar
// or the platform refreshes it).
type tokenFile struct {
	path string

	mu   sync.Mutex
	mod  time.Time
	size int64
	last string
}

func (f *tokenFile) token(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if f.last != "" && fi.ModTime().Equal(f.mod) && fi.Size() == f.size {
		return f.last, nil
	}
	t, err := config.SecretFile(f.path).Value()
	if err != nil {
		return "", err
	}
	f.last, f.mod, f.size = t, fi.ModTime(), fi.Size()
	return t, nil
}

// clientCreds is the OAuth 2 client-credentials flow: a token from the
// token endpoint, cached until shortly before it expires. A client
// secret from a file is read again for each new token.
type clientCreds struct {
	cfg    *clientcredentials.Config
	secret config.Secret

	mu  sync.Mutex
	tok *oauth2.Token
}

// expiryMargin is how long before its expiry a cached token is renewed.
const expiryMargin = time.Minute

func (c *clientCreds) token(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok != nil && (c.tok.Expiry.IsZero() || time.Until(c.tok.Expiry) > expiryMargin) {
		return c.tok.AccessToken, nil
	}
	secret, err := c.secret.Value()
	if err != nil {
		return "", err
	}
	cfg := *c.cfg
	cfg.ClientSecret = secret
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	t, err := cfg.Token(ctx)
	if err != nil {
		return "", fmt.Errorf("OAuth token from %s (client %s): %w", cfg.TokenURL, cfg.ClientID, redactTokenError(err))
	}
	c.tok = t
	return t.AccessToken, nil
}

// redactTokenError keeps a token endpoint's error code and description
// and drops the raw body it may echo.
func redactTokenError(err error) error {
	if re, ok := err.(*oauth2.RetrieveError); ok {
		msg := fmt.Sprintf("HTTP %d", re.Response.StatusCode)
		if re.ErrorCode != "" {
			msg += ": " + re.ErrorCode
		}
		if re.ErrorDescription != "" {
			msg += ": " + re.ErrorDescription
		}
		return fmt.Errorf("the token endpoint refused: %s", msg)
	}
	return err
}

// awsCredentials returns AWS credentials from the SDK's default chain
// (environment, shared config and credentials files, web identity, ECS,
// EC2 instance roles), loaded at the first authentication and cached (and
// refreshed) by the SDK.
func awsCredentials(profile string) func(context.Context) (aws.Auth, error) {
	var (
		mu   sync.Mutex
		prov awssdk.CredentialsProvider
	)
	return func(ctx context.Context) (aws.Auth, error) {
		mu.Lock()
		if prov == nil {
			var opts []func(*awsconfig.LoadOptions) error
			if profile != "" {
				opts = append(opts, awsconfig.WithSharedConfigProfile(profile))
			}
			cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
			if err != nil {
				mu.Unlock()
				return aws.Auth{}, fmt.Errorf("AWS credentials: %w", err)
			}
			if cfg.Credentials == nil {
				mu.Unlock()
				return aws.Auth{}, fmt.Errorf("AWS credentials: none found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, or run with an IAM role)")
			}
			prov = cfg.Credentials
		}
		p := prov
		mu.Unlock()
		cr, err := p.Retrieve(ctx)
		if err != nil {
			return aws.Auth{}, fmt.Errorf("AWS credentials: %w", err)
		}
		return aws.Auth{AccessKey: cr.AccessKeyID, SecretKey: cr.SecretAccessKey, SessionToken: cr.SessionToken}, nil
	}
}

// SourceOpts returns the franz-go options of a kafka source's client keys.
func SourceOpts(s *config.Source) []kgo.Opt {
	var opts []kgo.Opt
	if s.IsolationLevel == "read_committed" {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if s.FetchMaxBytes > 0 {
		opts = append(opts, kgo.FetchMaxBytes(s.FetchMaxBytes))
	}
	if s.FetchMaxPartitionBytes > 0 {
		opts = append(opts, kgo.FetchMaxPartitionBytes(s.FetchMaxPartitionBytes))
	}
	if s.FetchMinBytes > 0 {
		opts = append(opts, kgo.FetchMinBytes(s.FetchMinBytes))
	}
	if s.FetchMaxWait.Duration > 0 {
		opts = append(opts, kgo.FetchMaxWait(s.FetchMaxWait.Duration))
	}
	if s.GroupProtocol == "consumer" {
		// KIP-848 where the broker has it; else the classic protocol with
		// franz-go's default balancer, cooperative-sticky.
		opts = append(opts, kgo.ServerSideBalancer())
	}
	return opts
}

// SinkOpts returns the franz-go options of a kafka sink's client keys.
func SinkOpts(s *config.Sink) []kgo.Opt {
	var opts []kgo.Opt
	switch s.Acks {
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	}
	if s.Linger.Duration > 0 {
		opts = append(opts, kgo.ProducerLinger(s.Linger.Duration))
	}
	return opts
}
