//! Opening a connection to a mail server: TCP, then TLS (rustls with the system's root
//! certificates) when the server wants it from the start.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::config::Server;

/// How long opening a connection (TCP and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// A byte stream to a server, plain or TLS.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send + Debug {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + Debug> Stream for T {}

/// Opens a connection to `server`.
pub async fn open(server: &Server) -> Result<Box<dyn Stream>, String> {
    let connecting = async {
        let tcp = TcpStream::connect((server.host.as_str(), server.port))
            .await
            .map_err(|error| format!("cannot connect to {}:{}: {error}", server.host, server.port))?;
        if !server.tls {
            return Ok(Box::new(tcp) as Box<dyn Stream>);
        }
        let name = ServerName::try_from(server.host.clone())
            .map_err(|error| format!("{} is not a host name for tls: {error}", server.host))?;
        let tls = TlsConnector::from(Arc::new(tls_config())).connect(name, tcp).await;
        let tls = tls.map_err(|error| format!("tls with {}:{} failed: {error}", server.host, server.port))?;
        Ok(Box::new(tls) as Box<dyn Stream>)
    };
    tokio::time::timeout(CONNECT_TIMEOUT, connecting).await.map_err(|_| {
        format!("cannot connect to {}:{}: no answer within {CONNECT_TIMEOUT:?}", server.host, server.port)
    })?
}

/// A TLS client trusting the system's root certificates.
fn tls_config() -> ClientConfig {
    let mut roots = RootCertStore::empty();
    for certificate in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(certificate);
    }
    ClientConfig::builder().with_root_certificates(roots).with_no_client_auth()
}
