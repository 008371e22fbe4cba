//! Listening on ClusterIPs and forwarding connections to endpoints, following the API.

use std::collections::BTreeMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::routes::{Routes, attempt_order, routes};

/// How long a connection waits for one endpoint before trying the next: endpoints are on this
/// machine, so one that does not answer at once is gone.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// One ClusterIP and port: a listener that forwards each connection it accepts to one of its
/// backends. Closing (or dropping) it stops accepting; connections already forwarded carry on, as
/// kube-proxy's tracked connections do.
#[derive(Debug)]
pub struct Frontend {
    local: SocketAddr,
    backends: Arc<Mutex<Vec<SocketAddrV4>>>,
    accepting: JoinHandle<()>,
}

impl Frontend {
    pub async fn bind(address: SocketAddrV4, backends: Vec<SocketAddrV4>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(address).await?;
        let local = listener.local_addr()?;
        let backends = Arc::new(Mutex::new(backends));
        let accepting = tokio::spawn(accept(listener, backends.clone()));
        Ok(Self {
            local,
            backends,
            accepting,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Stops listening, and returns once the port refuses connections.
    pub async fn close(mut self) {
        self.accepting.abort();
        // The listener is dropped with the accepting task, which has ended once this returns.
        let _ = (&mut self.accepting).await;
    }

    /// Where connections accepted from now on go.
    pub fn set_backends(&self, backends: Vec<SocketAddrV4>) {
        *self.backends.lock().unwrap_or_else(PoisonError::into_inner) = backends;
    }
}

impl Drop for Frontend {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn accept(listener: TcpListener, backends: Arc<Mutex<Vec<SocketAddrV4>>>) {
    let mut turn = 0usize;
    loop {
        let (client, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accepting a connection to a ClusterIP");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let order = {
            let backends = backends.lock().unwrap_or_else(PoisonError::into_inner);
            attempt_order(&backends, turn)
        };
        turn = turn.wrapping_add(1);
        tokio::spawn(forward(client, order));
    }
}

/// Connects to the first backend of `order` that accepts, and relays until either side closes.
/// With none, the client's connection is closed.
async fn forward(mut client: TcpStream, order: Vec<SocketAddrV4>) {
    for backend in order {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(backend)).await {
            Ok(Ok(mut server)) => {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                return;
            }
            Ok(Err(error)) => {
                tracing::debug!(%backend, %error, "endpoint refused; trying the next")
            }
            Err(_) => tracing::debug!(%backend, "endpoint did not answer; trying the next"),
        }
    }
}

/// The cluster's Service proxy: follows Services and EndpointSlices and keeps one [`Frontend`]
/// per ClusterIP and port. Dropping it stops every listener.
#[derive(Debug)]
pub struct ServiceProxy {
    following: JoinHandle<()>,
}

impl ServiceProxy {
    /// Starts following the API; after each change the routes in effect are written to
    /// `record` (see [`super::routes::routes_in_effect`]).
    pub fn start(client: kube::Client, record: PathBuf) -> Self {
        Self {
            following: tokio::spawn(follow(client, record)),
        }
    }

    /// Stops following the API and listening, and returns once its watches are closed.
    pub async fn stop(mut self) {
        self.following.abort();
        let _ = (&mut self.following).await;
    }
}

impl Drop for ServiceProxy {
    fn drop(&mut self) {
        self.following.abort();
    }
}

async fn follow(client: kube::Client, record: PathBuf) {
    let (services, services_writer) = reflector::store::<Service>();
    let (slices, slices_writer) = reflector::store::<EndpointSlice>();
    let config = watcher::Config::default;
    let service_events = reflector::reflector(
        services_writer,
        watcher(Api::<Service>::all(client.clone()), config()),
    )
    .default_backoff()
    .map(|event| event.map(|e| is_settled(&e)));
    let slice_events = reflector::reflector(
        slices_writer,
        watcher(Api::<EndpointSlice>::all(client), config()),
    )
    .default_backoff()
    .map(|event| event.map(|e| is_settled(&e)));
    let events = futures::stream::select(service_events, slice_events);
    futures::pin_mut!(events);
    let mut frontends = BTreeMap::new();
    while let Some(event) = events.next().await {
        match event {
            // Objects listed one by one at (re)start are applied once the list is complete.
            Ok(false) => {}
            Ok(true) => {
                apply(&mut frontends, current_routes(&services, &slices)).await;
                write_routes(&record, &frontends);
            }
            Err(error) => tracing::warn!(%error, "watching Services and EndpointSlices; retrying"),
        }
    }
}

fn is_settled<K>(event: &watcher::Event<K>) -> bool {
    !matches!(event, watcher::Event::Init | watcher::Event::InitApply(_))
}

fn current_routes(services: &Store<Service>, slices: &Store<EndpointSlice>) -> Routes {
    let services: Vec<Service> = services.state().iter().map(|s| (**s).clone()).collect();
    let slices: Vec<EndpointSlice> = slices.state().iter().map(|s| (**s).clone()).collect();
    routes(&services, &slices)
}

/// Brings the listeners in line with `routes`: new ClusterIP ports get a listener, gone ones
/// lose theirs, and the others forward new connections to their current endpoints.
async fn apply(frontends: &mut BTreeMap<SocketAddrV4, Frontend>, routes: Routes) {
    let gone: Vec<SocketAddrV4> = frontends
        .keys()
        .filter(|address| !routes.contains_key(address))
        .copied()
        .collect();
    for address in gone {
        if let Some(frontend) = frontends.remove(&address) {
            frontend.close().await;
        }
    }
    for (address, backends) in routes {
        if let Some(frontend) = frontends.get(&address) {
            frontend.set_backends(backends);
            continue;
        }
        match Frontend::bind(address, backends).await {
            Ok(frontend) => {
                frontends.insert(address, frontend);
            }
            // Retried at the next change of Services or EndpointSlices.
            Err(error) => tracing::warn!(
                %address,
                %error,
                "cannot listen on a Service's ClusterIP; is it in the cluster's Service range?"
            ),
        }
    }
}

/// Records which endpoints each listening ClusterIP port forwards to, for `devcluster status`
/// and for tests that must know a change has taken effect.
fn write_routes(record: &Path, frontends: &BTreeMap<SocketAddrV4, Frontend>) {
    let in_effect: BTreeMap<String, Vec<String>> = frontends
        .iter()
        .map(|(address, frontend)| {
            let backends = frontend
                .backends
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            (
                address.to_string(),
                backends.iter().map(ToString::to_string).collect(),
            )
        })
        .collect();
    let written = serde_json::to_vec_pretty(&in_effect)
        .map_err(std::io::Error::other)
        .and_then(|json| std::fs::write(record, json));
    if let Err(error) = written {
        tracing::warn!(path = %record.display(), %error, "recording the Service routes");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that answers every connection with its name.
    async fn named_server(name: &'static str) -> std::io::Result<(SocketAddrV4, JoinHandle<()>)> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = match listener.local_addr()? {
            SocketAddr::V4(v4) => v4,
            SocketAddr::V6(_) => return Err(std::io::Error::other("not IPv4")),
        };
        let serving = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(name.as_bytes()).await;
            }
        });
        Ok((address, serving))
    }

    /// A loopback address nothing listens on.
    async fn closed_port() -> std::io::Result<SocketAddrV4> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        match listener.local_addr()? {
            SocketAddr::V4(v4) => Ok(v4),
            SocketAddr::V6(_) => Err(std::io::Error::other("not IPv4")),
        }
    }

    async fn ask(frontend: &Frontend) -> std::io::Result<String> {
        let mut stream = TcpStream::connect(frontend.local_addr()).await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        Ok(answer)
    }

    async fn answers(frontend: &Frontend, count: usize) -> std::io::Result<Vec<String>> {
        let mut all = Vec::new();
        for _ in 0..count {
            all.push(ask(frontend).await?);
        }
        Ok(all)
    }

    fn frontend_address() -> SocketAddrV4 {
        SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 0)
    }

    #[tokio::test]
    async fn connections_spread_and_a_removed_endpoint_gets_no_new_ones() -> std::io::Result<()> {
        let (a, _a) = named_server("a").await?;
        let (b, _b) = named_server("b").await?;
        let frontend = Frontend::bind(frontend_address(), vec![a, b]).await?;
        let mut seen = answers(&frontend, 4).await?;
        seen.sort();
        assert_eq!(seen, ["a", "a", "b", "b"]);

        frontend.set_backends(vec![b]);
        assert_eq!(answers(&frontend, 4).await?, ["b", "b", "b", "b"]);
        Ok(())
    }

    #[tokio::test]
    async fn an_endpoint_that_refuses_is_skipped() -> std::io::Result<()> {
        let dead = closed_port().await?;
        let (b, _b) = named_server("b").await?;
        let frontend = Frontend::bind(frontend_address(), vec![dead, b]).await?;
        assert_eq!(answers(&frontend, 3).await?, ["b", "b", "b"]);
        Ok(())
    }

    #[tokio::test]
    async fn without_endpoints_connections_are_closed_and_a_closed_frontend_refuses()
    -> std::io::Result<()> {
        let frontend = Frontend::bind(frontend_address(), vec![]).await?;
        assert_eq!(ask(&frontend).await?, "");
        let address = frontend.local_addr();
        frontend.close().await;
        let refused = TcpStream::connect(address).await.err().map(|e| e.kind());
        assert_eq!(refused, Some(std::io::ErrorKind::ConnectionRefused));
        Ok(())
    }
}
