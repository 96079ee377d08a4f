//! Ctrl-C / SIGTERM, delivered to every part of the process that must stop.

use tokio::sync::watch;

/// Resolves on the first Ctrl-C or SIGTERM.
pub async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// A stop signal many tasks can wait for: `Shutdown::on_signal()` trips on Ctrl-C/SIGTERM.
#[derive(Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

impl Shutdown {
    pub fn on_signal() -> Shutdown {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            signal().await;
            tracing::info!("stopping (signal received)");
            let _ = tx.send(true);
        });
        Shutdown { rx }
    }

    /// A stop signal tripped by sending `true` on the returned sender.
    #[cfg(test)]
    pub fn manual() -> (watch::Sender<bool>, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (tx, Shutdown { rx })
    }

    /// Resolves once the stop signal has tripped.
    pub async fn wait(mut self) {
        let _ = self.rx.wait_for(|stopped| *stopped).await;
    }
}
