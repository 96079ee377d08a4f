//! The view's router and feed against the in-process API server: nothing without a session
//! or the admin token; the login link works once and sets a Secure, HttpOnly,
//! SameSite=Strict cookie; actions refuse requests without the action header or from
//! another origin; the feed starts with a snapshot holding the objects and reconciles,
//! then delivers a deletion made from the page.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use futures::StreamExt;
use http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use steady_runtime::{Action, Config, Context, Controller, Recorder};
use steady_ui::Ui;
use tower::ServiceExt;

const ADMIN: &str = "admin-token";

/// Keeps one owned Secret `<name>-copy` per ConfigMap.
async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Context<()>>) -> Result<Action, kube::Error> {
    let name = format!("{}-copy", cm.metadata.name.clone().unwrap_or_default());
    let owned = ctx.cache::<Secret>().ok();
    let key = steady_runtime::ObjectKey::new(Some("default"), &name);
    if owned.and_then(|cache| cache.get(&key)).is_none() {
        let mut secret = Secret::default();
        secret.metadata.name = Some(name);
        secret.metadata.owner_references = cm.controller_owner_ref(&()).map(|r| vec![r]);
        ctx.api::<Secret>("default")
            .create(&PostParams::default(), &secret)
            .await?;
    }
    Ok(Action::done())
}

fn start_controller(client: &Client, recorder: &Recorder) {
    let config = Config {
        name: "copier".into(),
        resync_period: None,
        ..Config::default()
    };
    let mut controller = Controller::new(
        Api::<ConfigMap>::namespaced(client.clone(), "default"),
        config,
    )
    .with_recorder(recorder.clone());
    controller.owns(Api::<Secret>::namespaced(client.clone(), "default"));
    tokio::spawn(controller.run(reconcile, Arc::new(()), std::future::pending()));
}

async fn send(ui: &Ui, request: Request<Body>) -> http::Response<Body> {
    ui.router().oneshot(request).await.expect("infallible")
}

fn get(path: &str) -> http::request::Builder {
    Request::builder()
        .uri(path)
        .header(header::HOST, "127.0.0.1:6443")
}

/// A POST as the page sends it (`marked`: with the action header), from `origin`.
fn post(
    session: &str,
    path: &str,
    body: &'static str,
    origin: Option<&str>,
    marked: bool,
) -> Request<Body> {
    let mut request = get(path)
        .method("POST")
        .header(header::COOKIE, session)
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(origin) = origin {
        request = request.header(header::ORIGIN, origin);
    }
    if marked {
        request = request.header("x-steady-ui", "1");
    }
    request.body(Body::from(body)).expect("request")
}

async fn next_event(
    stream: &mut (
             impl futures::Stream<Item = Result<axum::response::sse::Event, std::convert::Infallible>>
             + Unpin
         ),
) -> String {
    let event = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("an event within 30 s")
        .expect("the feed goes on")
        .expect("infallible");
    // Event has no accessors: its wire form is what the page reads.
    let body = axum::response::sse::Sse::new(futures::stream::iter([Ok::<
        _,
        std::convert::Infallible,
    >(event)]));
    let wire = axum::response::IntoResponse::into_response(body).into_body();
    String::from_utf8_lossy(&wire.collect().await.expect("body").to_bytes()).into_owned()
}

#[tokio::test]
async fn login_cookie_guards_everything_and_the_feed_follows_the_loop() {
    let server = steady_apiserver::ApiServer::in_memory(Default::default())
        .await
        .expect("server");
    let client = server.client();
    let recorder = Recorder::new();
    let switch = steady_ui::Switch::new(true);
    let ui = Ui::new(
        client.clone(),
        recorder.clone(),
        ADMIN,
        Some(switch.clone()),
    );

    // Nothing without a session.
    for path in ["/ui/", "/ui/app.js", "/ui/api/events"] {
        let response = send(&ui, get(path).body(Body::empty()).unwrap()).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    let response = send(
        &ui,
        get("/ui/login?token=guess").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);

    // The login link: a cookie and a redirect, once.
    let login = ui.login_path();
    let response = send(&ui, get(&login).body(Body::empty()).unwrap()).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let cookie = response.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_string();
    for flag in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(cookie.contains(flag), "{cookie} lacks {flag}");
    }
    let session = cookie.split(';').next().unwrap().to_string();
    let again = send(&ui, get(&login).body(Body::empty()).unwrap()).await;
    assert_eq!(
        again.status(),
        StatusCode::UNAUTHORIZED,
        "the link works once"
    );

    let page = send(
        &ui,
        get("/ui/")
            .header(header::COOKIE, &session)
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(page.status(), StatusCode::OK);
    let bearer = send(
        &ui,
        get("/ui/app.js")
            .header(header::AUTHORIZATION, format!("Bearer {ADMIN}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(bearer.status(), StatusCode::OK);

    // Actions: the header is required, other origins are refused.
    let action = |origin, marked| {
        post(
            &session,
            "/ui/api/controller",
            r#"{"running":false}"#,
            origin,
            marked,
        )
    };
    assert_eq!(
        send(&ui, action(None, false)).await.status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        send(&ui, action(Some("https://evil.example"), true))
            .await
            .status(),
        StatusCode::FORBIDDEN
    );
    assert!(switch.wanted());
    assert_eq!(
        send(&ui, action(Some("https://127.0.0.1:6443"), true))
            .await
            .status(),
        StatusCode::NO_CONTENT
    );
    assert!(!switch.wanted(), "the action turned the switch");

    // The feed: a snapshot of the world the controller made, then the page's deletion.
    start_controller(&client, &recorder);
    let cm: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "a"}})).unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    steady_test_support::eventually("the copy", Duration::from_secs(30), || async {
        secrets.get_opt("a-copy").await.ok().flatten()
    })
    .await;
    let mut feed = Box::pin(steady_ui::feed::stream(ui.clone()));
    let snapshot = next_event(&mut feed).await;
    assert!(snapshot.starts_with("event: snapshot"), "{snapshot}");
    for expected in [
        "\"name\":\"a-copy\"",
        "\"type\":\"primary\"",
        "\"verb\":\"created\"",
    ] {
        assert!(
            snapshot.contains(expected),
            "snapshot lacks {expected}: {snapshot}"
        );
    }
    let delete = |body| post(&session, "/ui/api/delete", body, None, true);
    let owned = r#"{"kind":"Secret","namespace":"default","name":"a-copy"}"#;
    assert_eq!(
        send(&ui, delete(owned)).await.status(),
        StatusCode::NO_CONTENT
    );
    let primary = r#"{"kind":"ConfigMap","namespace":"default","name":"a"}"#;
    assert_eq!(
        send(&ui, delete(primary)).await.status(),
        StatusCode::NOT_FOUND,
        "only owned kinds"
    );
    let mut seen = String::new();
    while !seen.contains("\"type\":\"owned\",\"kind\":\"Secret\",\"name\":\"default/a-copy\"") {
        seen = next_event(&mut feed).await;
    }
    assert!(seen.starts_with("event: reconcile"), "{seen}");
}
