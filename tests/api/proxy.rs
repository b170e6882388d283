//! A TCP proxy between the app and the database that can fail on command:
//! go down (drop every connection and refuse new ones) or lose replies
//! (forward requests, discard what the server answers). It injects the
//! faults a real network has, with the real server behind it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Down,
    LoseReplies,
    /// Forward everything, but once a connection carries a
    /// `commitTransaction`, drop every reply on it: the commit is applied
    /// and its answer never arrives.
    LoseCommitReplies,
    /// Forward everything, but once a connection carries a request that
    /// holds these bytes, drop every reply on it: that request (a report's
    /// read, say) never gets its answer, and the others go on.
    LoseRepliesAfter(&'static [u8]),
}

pub struct Proxy {
    pub addr: SocketAddr,
    mode: watch::Sender<Mode>,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mode, _) = watch::channel(Mode::Pass);
        let tasks = Arc::new(Mutex::new(Vec::new()));
        let modes = mode.clone();
        let conns = tasks.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *modes.borrow() == Mode::Down {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(target).await else {
                    continue;
                };
                let mode = modes.subscribe();
                conns
                    .lock()
                    .unwrap()
                    .push(tokio::spawn(pump(client, server, mode)));
            }
        });
        Self { addr, mode, tasks }
    }

    /// `mongodb://` URI through this proxy.
    pub fn uri(&self) -> String {
        format!("mongodb://{}/?directConnection=true", self.addr)
    }

    pub fn set(&self, mode: Mode) {
        if mode == Mode::Down {
            for task in self.tasks.lock().unwrap().drain(..) {
                task.abort();
            }
        }
        self.mode.send_replace(mode);
    }
}

async fn pump(mut client: TcpStream, mut server: TcpStream, mode: watch::Receiver<Mode>) {
    let (mut cr, mut cw) = client.split();
    let (mut sr, mut sw) = server.split();
    let committing = std::sync::atomic::AtomicBool::new(false);
    let up = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = cr.read(&mut buf).await?;
            if n == 0 {
                return Ok::<_, std::io::Error>(());
            }
            let marker: &[u8] = match *mode.borrow() {
                Mode::LoseCommitReplies => b"commitTransaction",
                Mode::LoseRepliesAfter(bytes) => bytes,
                _ => b"",
            };
            if !marker.is_empty() && buf[..n].windows(marker.len()).any(|w| w == marker) {
                committing.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            sw.write_all(&buf[..n]).await?;
        }
    };
    let down = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = sr.read(&mut buf).await?;
            if n == 0 {
                return Ok::<_, std::io::Error>(());
            }
            let lose = match *mode.borrow() {
                Mode::LoseReplies => true,
                Mode::LoseCommitReplies | Mode::LoseRepliesAfter(_) => {
                    committing.load(std::sync::atomic::Ordering::SeqCst)
                }
                _ => false,
            };
            if !lose {
                cw.write_all(&buf[..n]).await?;
            }
        }
    };
    let _ = tokio::select! { r = up => r, r = down => r };
}

/// Where writes go for `uri`: the replica set's primary as `hello` names
/// it, else (mongos, standalone) the host the URI names.
pub async fn write_target(uri: &str) -> SocketAddr {
    use std::net::ToSocketAddrs;
    let client = mongodb::Client::with_uri_str(uri).await.unwrap();
    let hello = client
        .database("admin")
        .run_command(bson::doc! {"hello": 1})
        .await
        .unwrap();
    let host = match hello.get_str("primary") {
        Ok(primary) => primary.to_owned(),
        Err(_) => {
            let rest = uri.trim_start_matches("mongodb://");
            let hosts = rest.split(['/', '?']).next().unwrap();
            let first = hosts.split(',').next().unwrap();
            first.rsplit('@').next().unwrap().to_owned()
        }
    };
    host.to_socket_addrs().unwrap().next().unwrap()
}
