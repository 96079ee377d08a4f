"""The official Python `kubernetes` client (v37) against a live `steady server`."""

import json
import threading
import time
from pathlib import Path

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

WATCH_TIMEOUT = 10  # seconds; server-side timeoutSeconds for each watch
CRD_GROUP = "example.steady.dev"
CRD_VERSION = "v1"
CRD_PLURAL = "widgets"
CRD_KIND = "Widget"


@pytest.fixture(scope="module")
def core(api_client):
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def ext(api_client):
    return client.ApiextensionsV1Api(api_client)


@pytest.fixture(scope="module")
def custom(api_client):
    return client.CustomObjectsApi(api_client)


def expect_status(status, fn, *args, **kwargs):
    with pytest.raises(ApiException) as info:
        fn(*args, **kwargs)
    assert info.value.status == status, (
        f"expected HTTP {status}, got {info.value.status}: {info.value.body}")
    return info.value


def wait_gone(read, *args, timeout=10.0):
    """Poll `read(*args)` until it 404s (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            read(*args)
        except ApiException as e:
            if e.status == 404:
                return
            raise
        if time.monotonic() > deadline:
            raise AssertionError(f"{args} still exists after {timeout}s")
        time.sleep(0.1)


# --------------------------------------------------------------------------- configmaps


def test_configmap_crud(core, namespace, unique):
    name = f"cm-{unique}"
    labels = {"app": "pytest", "run": unique}
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        data={"a": "1", "b": "2"},
    )

    created = core.create_namespaced_config_map(namespace, body)
    assert created.metadata.name == name
    assert created.metadata.namespace == namespace
    assert created.metadata.uid
    assert isinstance(created.metadata.resource_version, str)
    assert created.metadata.creation_timestamp is not None
    assert created.data == {"a": "1", "b": "2"}
    assert created.kind == "ConfigMap" and created.api_version == "v1"

    got = core.read_namespaced_config_map(name, namespace)
    assert got.metadata.uid == created.metadata.uid
    assert got.metadata.resource_version == created.metadata.resource_version
    assert got.data == {"a": "1", "b": "2"}

    # A second configmap that must NOT match the selector.
    other = core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=f"cm-other-{unique}",
                                     labels={"app": "pytest", "run": "other"})))

    listed = core.list_namespaced_config_map(namespace, label_selector=f"run={unique}")
    assert [i.metadata.name for i in listed.items] == [name]
    assert isinstance(listed.metadata.resource_version, str)
    listed_set = core.list_namespaced_config_map(
        namespace, label_selector=f"app=pytest,run in ({unique},other)")
    assert {i.metadata.name for i in listed_set.items} == {name, other.metadata.name}
    none = core.list_namespaced_config_map(namespace, label_selector="run=does-not-exist")
    assert none.items == []

    # replace (PUT) with the current resourceVersion
    got.data = {"a": "10"}
    replaced = core.replace_namespaced_config_map(name, namespace, got)
    assert replaced.data == {"a": "10"}
    assert replaced.metadata.resource_version != got.metadata.resource_version
    assert replaced.metadata.uid == created.metadata.uid

    # patch with a dict -> strategic merge patch: merges keys, null deletes
    patched = core.patch_namespaced_config_map(
        name, namespace, {"data": {"b": "20", "a": None}, "metadata": {"labels": {"extra": "yes"}}})
    assert patched.data == {"b": "20"}
    assert patched.metadata.labels == {**labels, "extra": "yes"}
    assert patched.metadata.resource_version != replaced.metadata.resource_version

    # delete, then it is gone
    core.delete_namespaced_config_map(name, namespace)
    wait_gone(core.read_namespaced_config_map, name, namespace)
    core.delete_namespaced_config_map(other.metadata.name, namespace)
    listed = core.list_namespaced_config_map(namespace, label_selector=f"run={unique}")
    assert listed.items == []


# --------------------------------------------------------------------------- pods


def make_pod(name, labels, image="busybox:1.36"):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(containers=[
            client.V1Container(name="main", image=image, command=["sleep", "3600"],
                               env=[client.V1EnvVar(name="A", value="1")]),
        ]),
    )


def wait_for(fn, what, timeout=15.0, interval=0.1):
    """Bounded poll until fn() returns something truthy; returns that value."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def replace_with_retry(read, replace, mutate, attempts=10):
    """Read-modify-replace, retrying on 409 (the simulated node writes pods concurrently)."""
    for i in range(attempts):
        obj = read()
        mutate(obj)
        try:
            return replace(obj)
        except ApiException as e:
            if e.status != 409 or i == attempts - 1:
                raise
            time.sleep(0.05)


def test_pod_crud(core, namespace, unique):
    name = f"pod-{unique}"
    labels = {"app": "pytest-pod", "run": unique}

    created = core.create_namespaced_pod(namespace, make_pod(name, labels))
    assert created.metadata.name == name
    assert created.kind == "Pod"
    assert created.spec.containers[0].image == "busybox:1.36"
    assert created.spec.containers[0].command == ["sleep", "3600"]

    got = core.read_namespaced_pod(name, namespace)
    assert got.metadata.uid == created.metadata.uid

    listed = core.list_namespaced_pod(namespace, label_selector=f"app=pytest-pod,run={unique}")
    assert [p.metadata.name for p in listed.items] == [name]
    assert core.list_namespaced_pod(namespace, label_selector=f"run!={unique},app=pytest-pod").items == []

    # The simulated node binds and starts the pod; the client must parse its status.
    def running_pod():
        p = core.read_namespaced_pod(name, namespace)
        return p if p.status and p.status.phase == "Running" else None
    running = wait_for(running_pod, "pod Running")
    assert running.spec.node_name
    assert {c.type for c in running.status.conditions or []} >= {"Ready"}

    # replace: change labels and an annotation (mutable pod fields)
    def mutate(p):
        p.metadata.annotations = {"note": "replaced"}
        p.metadata.labels = {**labels, "phase": "two"}
    replaced = replace_with_retry(lambda: core.read_namespaced_pod(name, namespace),
                                  lambda p: core.replace_namespaced_pod(name, namespace, p),
                                  mutate)
    assert replaced.metadata.annotations == {"note": "replaced"}
    assert replaced.metadata.labels["phase"] == "two"

    # strategic merge patch: containers merge by name; of a pod's spec only images change
    patched = core.patch_namespaced_pod(name, namespace, {
        "metadata": {"labels": {"patched": "true"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]},
    })
    assert patched.metadata.labels["patched"] == "true"
    assert patched.metadata.labels["phase"] == "two"
    assert len(patched.spec.containers) == 1
    c = patched.spec.containers[0]
    assert c.image == "busybox:1.37"
    assert c.command == ["sleep", "3600"]
    assert {e.name: e.value for e in c.env} == {"A": "1"}

    # an env var added is refused as kube-apiserver refuses it, and changes nothing
    with pytest.raises(ApiException) as info:
        core.patch_namespaced_pod(name, namespace, {
            "spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]}]},
        })
    assert info.value.status == 422
    status = json.loads(info.value.body)
    assert status["reason"] == "Invalid"
    assert status["details"]["causes"][0]["field"] == "spec"
    assert "pod updates may not change fields other than" in status["message"]
    env = core.read_namespaced_pod(name, namespace).spec.containers[0].env
    assert {e.name: e.value for e in env} == {"A": "1"}

    # graceful delete: the node confirms it shortly
    core.delete_namespaced_pod(name, namespace)
    wait_gone(core.read_namespaced_pod, name, namespace, timeout=20)


# --------------------------------------------------------------------------- watch


def _collect(w, gen, want, deadline):
    """Collect (type, name) events from `gen` until `want` is a prefix-ordered subset."""
    seen = []
    for ev in gen:
        obj = ev["object"]
        seen.append((ev["type"], obj.metadata.name, obj))
        if [(t, n) for t, n, _ in seen if (t, n) in want] == want:
            w.stop()
            break
        if time.monotonic() > deadline:
            w.stop()
            break
    return seen


def test_watch_live_writes(core, namespace, unique):
    """Events for writes made on another thread while the watch is open."""
    name = f"watch-{unique}"
    selector = f"watchrun={unique}"
    start_rv = core.list_namespaced_config_map(namespace, label_selector=selector).metadata.resource_version
    errors = []

    def writer():
        try:
            time.sleep(0.5)  # let the watch connect; the start RV covers us if it hasn't
            core.create_namespaced_config_map(namespace, client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=name, labels={"watchrun": unique}),
                data={"v": "1"}))
            core.patch_namespaced_config_map(name, namespace, {"data": {"v": "2"}})
            core.delete_namespaced_config_map(name, namespace)
        except Exception as e:  # surfaced in the main thread
            errors.append(e)

    t = threading.Thread(target=writer, daemon=True)
    w = watch.Watch()
    t.start()
    want = [("ADDED", name), ("MODIFIED", name), ("DELETED", name)]
    seen = _collect(w, w.stream(core.list_namespaced_config_map, namespace,
                                label_selector=selector, resource_version=start_rv,
                                timeout_seconds=WATCH_TIMEOUT),
                    want, time.monotonic() + WATCH_TIMEOUT + 5)
    t.join(timeout=10)
    assert not errors, errors
    got = [(t_, n) for t_, n, _ in seen]
    assert got == want, f"events seen: {got}"
    objs = [o for _, _, o in seen]
    assert isinstance(objs[0], client.V1ConfigMap)
    assert objs[0].data == {"v": "1"}
    assert objs[1].data == {"v": "2"}
    rvs = [o.metadata.resource_version for o in objs]
    assert len(set(rvs)) == 3, rvs


def test_watch_from_resource_version(core, namespace, unique):
    """Writes made first are replayed by a watch started at an earlier resourceVersion."""
    name = f"watchrv-{unique}"
    selector = f"watchrv={unique}"
    start_rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels={"watchrv": unique}), data={"v": "1"}))
    core.patch_namespaced_config_map(name, namespace, {"data": {"v": "2"}})
    core.delete_namespaced_config_map(name, namespace)

    w = watch.Watch()
    want = [("ADDED", name), ("MODIFIED", name), ("DELETED", name)]
    seen = _collect(w, w.stream(core.list_namespaced_config_map, namespace,
                                label_selector=selector, resource_version=start_rv,
                                timeout_seconds=WATCH_TIMEOUT),
                    want, time.monotonic() + WATCH_TIMEOUT + 5)
    assert [(t, n) for t, n, _ in seen] == want


def test_watch_timeout_ends_stream(core, namespace, unique):
    """With timeout_seconds and no events the server closes the stream on time."""
    w = watch.Watch()
    t0 = time.monotonic()
    events = list(w.stream(core.list_namespaced_config_map, namespace,
                           label_selector=f"nothing={unique}", timeout_seconds=1))
    elapsed = time.monotonic() - t0
    assert events == []
    assert elapsed < 8, f"watch with timeoutSeconds=1 lasted {elapsed:.1f}s"


# --------------------------------------------------------------------------- CRDs


def widget_crd():
    schema = client.V1JSONSchemaProps(
        type="object",
        properties={
            "spec": client.V1JSONSchemaProps(
                type="object",
                properties={
                    "size": client.V1JSONSchemaProps(type="integer"),
                    "color": client.V1JSONSchemaProps(type="string"),
                },
            ),
            "status": client.V1JSONSchemaProps(
                type="object",
                properties={
                    "phase": client.V1JSONSchemaProps(type="string"),
                    "observed": client.V1JSONSchemaProps(type="integer"),
                },
            ),
        },
    )
    return client.V1CustomResourceDefinition(
        api_version="apiextensions.k8s.io/v1",
        kind="CustomResourceDefinition",
        metadata=client.V1ObjectMeta(name=f"{CRD_PLURAL}.{CRD_GROUP}"),
        spec=client.V1CustomResourceDefinitionSpec(
            group=CRD_GROUP,
            scope="Namespaced",
            names=client.V1CustomResourceDefinitionNames(
                plural=CRD_PLURAL, singular="widget", kind=CRD_KIND, short_names=["wg"]),
            versions=[client.V1CustomResourceDefinitionVersion(
                name=CRD_VERSION, served=True, storage=True,
                schema=client.V1CustomResourceValidation(open_apiv3_schema=schema),
                subresources=client.V1CustomResourceSubresources(status={}),
            )],
        ),
    )


def _established(crd):
    conds = (crd.status.conditions if crd.status else None) or []
    return any(c.type == "Established" and c.status == "True" for c in conds)


@pytest.fixture(scope="module")
def widget_crd_installed(ext, custom, namespace):
    name = f"{CRD_PLURAL}.{CRD_GROUP}"
    try:
        ext.create_custom_resource_definition(widget_crd())
    except ApiException as e:
        if e.status != 409:
            raise
    # Bounded poll: Established, and the new endpoint actually serving.
    deadline = time.monotonic() + 15
    while True:
        crd = ext.read_custom_resource_definition(name)
        ok = _established(crd)
        if ok:
            try:
                custom.list_namespaced_custom_object(CRD_GROUP, CRD_VERSION, namespace, CRD_PLURAL)
            except ApiException as e:
                if e.status != 404:
                    raise
                ok = False
        if ok:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"CRD {name} not established/serving after 15s: {crd.status}")
        time.sleep(0.1)
    yield crd
    try:
        ext.delete_custom_resource_definition(name)
    except ApiException as e:
        if e.status != 404:
            raise


def test_crd_read_and_list(ext, widget_crd_installed):
    crd = ext.read_custom_resource_definition(f"{CRD_PLURAL}.{CRD_GROUP}")
    assert crd.spec.group == CRD_GROUP
    assert crd.spec.names.kind == CRD_KIND
    assert crd.spec.versions[0].subresources.status is not None
    assert _established(crd)
    names = [c.metadata.name for c in ext.list_custom_resource_definition().items]
    assert f"{CRD_PLURAL}.{CRD_GROUP}" in names


def test_custom_objects(custom, namespace, unique, widget_crd_installed):
    name = f"w-{unique}"
    body = {
        "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
        "kind": CRD_KIND,
        "metadata": {"name": name, "labels": {"run": unique}},
        "spec": {"size": 3, "color": "red"},
    }
    args = (CRD_GROUP, CRD_VERSION, namespace, CRD_PLURAL)

    created = custom.create_namespaced_custom_object(*args, body)
    assert created["metadata"]["name"] == name
    assert created["kind"] == CRD_KIND
    assert created["apiVersion"] == f"{CRD_GROUP}/{CRD_VERSION}"
    assert created["spec"] == {"size": 3, "color": "red"}
    assert isinstance(created["metadata"]["resourceVersion"], str)
    assert isinstance(created["metadata"]["generation"], int)
    gen1 = created["metadata"]["generation"]

    got = custom.get_namespaced_custom_object(*args, name)
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    assert got["spec"] == {"size": 3, "color": "red"}

    listed = custom.list_namespaced_custom_object(*args, label_selector=f"run={unique}")
    assert listed["kind"] == f"{CRD_KIND}List"
    assert [i["metadata"]["name"] for i in listed["items"]] == [name]
    assert custom.list_namespaced_custom_object(*args, label_selector="run=nope")["items"] == []

    # merge patch on the main resource: bumps generation, null removes a field
    patched = custom.patch_namespaced_custom_object(*args, name,
                                                    {"spec": {"size": 5, "color": None}})
    assert patched["spec"] == {"size": 5}
    assert patched["metadata"]["generation"] > gen1
    gen2 = patched["metadata"]["generation"]

    # status subresource: main-resource writes ignore status ...
    ignored = custom.patch_namespaced_custom_object(*args, name, {"status": {"phase": "Sneaky"}})
    assert "phase" not in (ignored.get("status") or {})

    # ... and status writes ignore spec, without bumping generation
    st = custom.patch_namespaced_custom_object_status(
        *args, name, {"status": {"phase": "Ready", "observed": gen2}, "spec": {"size": 99}})
    assert st["status"] == {"phase": "Ready", "observed": gen2}
    assert st["spec"] == {"size": 5}
    assert st["metadata"]["generation"] == gen2

    got = custom.get_namespaced_custom_object_status(*args, name)
    assert got["status"]["phase"] == "Ready"

    # delete
    custom.delete_namespaced_custom_object(*args, name)
    wait_gone(custom.get_namespaced_custom_object, *args, name)


def test_custom_object_schema_rejects_wrong_type(custom, namespace, unique, widget_crd_installed):
    body = {
        "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
        "kind": CRD_KIND,
        "metadata": {"name": f"bad-{unique}"},
        "spec": {"size": "not-a-number"},
    }
    expect_status(422, custom.create_namespaced_custom_object,
                  CRD_GROUP, CRD_VERSION, namespace, CRD_PLURAL, body)


# --------------------------------------------------------------------------- errors


def test_not_found(core, custom, namespace, unique, widget_crd_installed):
    e = expect_status(404, core.read_namespaced_config_map, f"missing-{unique}", namespace)
    assert "NotFound" in (e.body or "")
    expect_status(404, core.read_namespaced_pod, f"missing-{unique}", namespace)
    expect_status(404, core.delete_namespaced_config_map, f"missing-{unique}", namespace)
    expect_status(404, custom.get_namespaced_custom_object,
                  CRD_GROUP, CRD_VERSION, namespace, CRD_PLURAL, f"missing-{unique}")


def test_create_existing_conflicts(core, namespace, unique):
    name = f"dup-{unique}"
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"x": "1"})
    core.create_namespaced_config_map(namespace, body)
    try:
        e = expect_status(409, core.create_namespaced_config_map, namespace, body)
        assert "AlreadyExists" in (e.body or "")
    finally:
        core.delete_namespaced_config_map(name, namespace)


def test_replace_with_stale_resource_version_conflicts(core, namespace, unique):
    name = f"stale-{unique}"
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name), data={"x": "1"}))
    try:
        stale = core.read_namespaced_config_map(name, namespace)
        core.patch_namespaced_config_map(name, namespace, {"data": {"x": "2"}})
        stale.data = {"x": "3"}
        e = expect_status(409, core.replace_namespaced_config_map, name, namespace, stale)
        assert "Conflict" in (e.body or "")
        assert core.read_namespaced_config_map(name, namespace).data == {"x": "2"}
    finally:
        core.delete_namespaced_config_map(name, namespace)


def _config_with_token(good, token):
    cfg = client.Configuration()
    cfg.host = good.host
    cfg.ssl_ca_cert = good.ssl_ca_cert
    cfg.verify_ssl = True
    cfg.api_key = {"authorization": token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return cfg


def test_bad_token_unauthorized(steady_server, api_client):
    good = api_client.configuration
    real = good.get_api_key_with_prefix("BearerToken", alias="authorization")
    assert real and real.startswith("Bearer "), "kubeconfig carried no bearer token"
    # Control: the same hand-built Configuration with the real token works ...
    with client.ApiClient(_config_with_token(good, real[len("Bearer "):])) as c:
        client.CoreV1Api(c).list_namespaced_config_map("default")
    # ... and with a wrong token it is 401.
    with client.ApiClient(_config_with_token(good, "not-the-token")) as c:
        e = expect_status(401, client.CoreV1Api(c).list_namespaced_config_map, "default")
        assert "Unauthorized" in (e.body or "")
    # No token at all is also 401.
    anon = client.Configuration()
    anon.host = good.host
    anon.ssl_ca_cert = good.ssl_ca_cert
    with client.ApiClient(anon) as c:
        expect_status(401, client.CoreV1Api(c).list_namespaced_config_map, "default")


# --------------------------------------------------------------------------- extras


def test_noop_patch_keeps_resource_version(core, namespace, unique):
    name = f"noop-{unique}"
    created = core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name), data={"x": "1"}))
    try:
        same = core.patch_namespaced_config_map(name, namespace, {"data": {"x": "1"}})
        assert same.metadata.resource_version == created.metadata.resource_version
    finally:
        core.delete_namespaced_config_map(name, namespace)


def test_json_patch_and_failed_test_op(core, namespace, unique):
    name = f"jp-{unique}"
    created = core.create_namespaced_config_map(namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name), data={"x": "1"}))
    try:
        rv = created.metadata.resource_version
        # a list body is sent as application/json-patch+json
        patched = core.patch_namespaced_config_map(name, namespace, [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/data/y", "value": "2"},
        ])
        assert patched.data == {"x": "1", "y": "2"}
        expect_status(422, core.patch_namespaced_config_map, name, namespace, [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/data/z", "value": "3"},
        ])
    finally:
        core.delete_namespaced_config_map(name, namespace)


def test_namespaces_generate_name_and_delete_options(core, unique):
    ns = f"ns-{unique}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    assert ns in [n.metadata.name for n in core.list_namespace().items]
    cm = core.create_namespaced_config_map(ns, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(generate_name="gen-", labels={"nsrun": unique})))
    assert cm.metadata.name.startswith("gen-") and len(cm.metadata.name) > len("gen-")
    assert cm.metadata.namespace == ns
    everywhere = core.list_config_map_for_all_namespaces(label_selector=f"nsrun={unique}")
    assert [(c.metadata.namespace, c.metadata.name) for c in everywhere.items] == \
        [(ns, cm.metadata.name)]
    core.delete_namespaced_config_map(
        cm.metadata.name, ns, body=client.V1DeleteOptions(propagation_policy="Background"))
    wait_gone(core.read_namespaced_config_map, cm.metadata.name, ns)
    core.delete_namespace(ns)
    wait_gone(core.read_namespace, ns, timeout=20)


# --------------------------------------------------------------------------- built-in kinds


def test_builtin_kinds_of_every_group(api_client, namespace, unique):
    """One object of several kinds beyond the core ones, each through its typed API."""
    labels = {"app": f"b-{unique}"}
    template = {
        "metadata": {"labels": labels},
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox:1.36"}]},
    }
    apps = client.AppsV1Api(api_client)
    batch = client.BatchV1Api(api_client)
    net = client.NetworkingV1Api(api_client)
    policy = client.PolicyV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    name = f"b-{unique}"
    meta = {"name": name}
    sts = apps.create_namespaced_stateful_set(namespace, {
        "metadata": meta,
        "spec": {"serviceName": name, "selector": {"matchLabels": labels},
                 "template": {**template, "spec": {**template["spec"], "restartPolicy": "Always"}}},
    })
    assert sts.spec.replicas == 1
    job = batch.create_namespaced_job(namespace, {"metadata": meta, "spec": {"template": template}})
    assert (job.spec.completions, job.spec.parallelism) == (1, 1)
    batch.create_namespaced_cron_job(namespace, {
        "metadata": meta,
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template}}},
    })
    net.create_namespaced_network_policy(namespace, {"metadata": meta, "spec": {"podSelector": {}}})
    policy.create_namespaced_pod_disruption_budget(namespace, {
        "metadata": meta, "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}})
    rbac.create_namespaced_role(namespace, {
        "metadata": meta, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
    assert apps.read_namespaced_stateful_set(name, namespace).metadata.name == name
    assert [j.metadata.name for j in batch.list_namespaced_job(namespace).items].count(name) == 1
    assert net.read_namespaced_network_policy(name, namespace).metadata.name == name
    assert policy.read_namespaced_pod_disruption_budget(name, namespace).spec.min_available == 1
    assert rbac.read_namespaced_role(name, namespace).rules[0].verbs == ["get"]

    bad = {"metadata": {"name": f"bad-{unique}"},
           "spec": {"selector": {"matchLabels": {"app": "other"}}, "template": template}}
    err = expect_status(422, apps.create_namespaced_deployment, namespace, bad)
    assert "`selector` does not match template `labels`" in err.body

    review = client.AuthorizationV1Api(api_client).create_self_subject_access_review({
        "spec": {"resourceAttributes": {"verb": "create", "group": "apps", "resource": "deployments"}}})
    assert review.status.allowed is True
    assert client.CoreV1Api(api_client).read_namespaced_service_account("default", namespace)


def test_server_side_apply_with_the_dynamic_client(api_client, namespace, unique):
    """Field ownership as on a cluster: apply removes what its manager stopped applying,
    a second manager's change to an owned field is a 409 naming the owner, force takes
    it over, and managedFields say who owns what."""
    from kubernetes.dynamic import DynamicClient

    configmaps = DynamicClient(api_client).resources.get(api_version="v1", kind="ConfigMap")
    name = f"ssa-{unique}"

    def apply(data, manager, force=None):
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name}, "data": data}
        return configmaps.server_side_apply(body=body, namespace=namespace,
                                            field_manager=manager, force_conflicts=force)

    try:
        apply({"a": "1", "b": "2"}, "first")
        applied = apply({"a": "1"}, "first")
        assert applied.data.to_dict() == {"a": "1"}, "b was dropped by its only applier"

        conflict = json.loads(expect_status(409, apply, {"a": "changed"}, "second").body)
        assert conflict["message"] == 'Apply failed with 1 conflict: conflict with "first": .data.a'
        assert conflict["details"]["causes"][0]["field"] == ".data.a"

        forced = apply({"a": "changed"}, "second", force=True)
        assert forced.data.a == "changed"
        owners = {entry.manager: entry.operation for entry in forced.metadata.managedFields}
        assert owners.get("second") == "Apply", owners
    finally:
        configmaps.delete(name=name, namespace=namespace)


def test_every_namespace_publishes_the_root_ca(core, steady_server, unique):
    """kube's root-ca-cert-publisher: `kube-root-ca.crt` in every namespace, holding the CA
    the kubeconfig trusts (pods' token volumes name it)."""
    import base64
    import yaml

    kubeconfig = yaml.safe_load(Path(steady_server.kubeconfig).read_text())
    ca = base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    name = f"ca-{unique}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        for namespace in ("default", name):
            published = wait_for(
                lambda: _read_optional(core.read_namespaced_config_map, "kube-root-ca.crt", namespace),
                f"kube-root-ca.crt in {namespace}")
            assert published.data["ca.crt"].strip() == ca.strip()
    finally:
        core.delete_namespace(name)


def _read_optional(read, *args):
    try:
        return read(*args)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def test_unknown_fields_and_wrong_types(api_client, namespace, unique):
    """What the dynamic client sends as written (the typed API's models refuse unknown
    fields themselves): a field the kind does not have is dropped, as kube's decoder drops
    it; a value of the wrong type is a 400 in Go's words, and nothing is stored."""
    from kubernetes.dynamic import DynamicClient

    resources = DynamicClient(api_client).resources
    deployments = resources.get(api_version="apps/v1", kind="Deployment")
    configmaps = resources.get(api_version="v1", kind="ConfigMap")
    name = f"typo-{unique}"
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replica": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}
    created = deployments.create(body=body, namespace=namespace).to_dict()
    assert "replica" not in created["spec"]
    assert created["spec"]["replicas"] == 1, "the misspelt field is dropped, replicas defaulted"

    numbers = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"n-{unique}"},
               "data": {"port": 8080}}
    refused = expect_status(400, configmaps.create, body=numbers, namespace=namespace)
    assert json.loads(refused.body)["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
        'number into Go struct field ConfigMap.data of type string')
    expect_status(404, configmaps.get, name=f"n-{unique}", namespace=namespace)


def test_a_service_account_token_is_held_to_its_roles(api_client, core, unique):
    """An operator's own token, as it would run in a cluster: refused with kube's 403
    until a Role bound to its service account allows the request."""
    import copy

    ns = f"rbac-{unique}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    try:
        core.create_namespaced_service_account(
            ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="operator")))
        token = core.create_namespaced_service_account_token(
            "operator", ns, client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(audiences=[]))).status.token
        configuration = copy.copy(api_client.configuration)
        configuration.api_key = {"BearerToken": f"Bearer {token}"}
        configuration.refresh_api_key_hook = None
        with client.ApiClient(configuration) as as_operator:
            pods = client.CoreV1Api(as_operator)
            refused = expect_status(403, pods.list_namespaced_pod, ns)
            assert json.loads(refused.body)["message"] == (
                f'pods is forbidden: User "system:serviceaccount:{ns}:operator" cannot list '
                f'resource "pods" in API group "" in the namespace "{ns}"')
            rbac = client.RbacAuthorizationV1Api(api_client)
            rbac.create_namespaced_role(ns, client.V1Role(
                metadata=client.V1ObjectMeta(name="pods"),
                rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"],
                                           verbs=["list"]),
                       client.V1PolicyRule(api_groups=["rbac.authorization.k8s.io"],
                                           resources=["rolebindings"], verbs=["create"])]))
            rbac.create_namespaced_role_binding(ns, client.V1RoleBinding(
                metadata=client.V1ObjectMeta(name="pods"),
                role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io",
                                          kind="Role", name="pods"),
                subjects=[client.RbacV1Subject(kind="ServiceAccount", name="operator",
                                               namespace=ns)]))
            assert pods.list_namespaced_pod(ns).items == []
            expect_status(403, pods.list_namespaced_pod, "default")
            # It may write bindings, but grant only what it holds (kube's escalation check).
            binding = client.V1RoleBinding(
                metadata=client.V1ObjectMeta(name="edit"),
                role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io",
                                          kind="ClusterRole", name="edit"),
                subjects=[client.RbacV1Subject(kind="ServiceAccount", name="operator",
                                               namespace=ns)])
            refused = expect_status(
                403, client.RbacAuthorizationV1Api(as_operator).create_namespaced_role_binding,
                ns, binding)
            message = json.loads(refused.body)["message"]
            assert message.startswith(
                f'rolebindings.rbac.authorization.k8s.io "edit" is forbidden: user '
                f'"system:serviceaccount:{ns}:operator" (groups=["system:serviceaccounts" '
                f'"system:serviceaccounts:{ns}" "system:authenticated"]) is attempting to '
                f'grant RBAC permissions not currently held:\n'), message
            assert ('{APIGroups:[""], Resources:["secrets"], '
                    'Verbs:["get" "list" "watch" "create" "delete"') in message
    finally:
        core.delete_namespace(ns)


def test_a_token_secret_is_filled_and_is_its_account(api_client, core, unique):
    """A `kubernetes.io/service-account-token` Secret created by hand, as CI systems do:
    the token controller fills it, its token authenticates as the account, and it goes
    with the account."""
    import base64
    import copy

    ns = f"token-{unique}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    try:
        core.create_namespaced_service_account(
            ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="ci")))
        core.create_namespaced_secret(ns, client.V1Secret(
            metadata=client.V1ObjectMeta(
                name="ci-token", annotations={"kubernetes.io/service-account.name": "ci"}),
            type="kubernetes.io/service-account-token"))
        deadline = time.monotonic() + 10
        while not (core.read_namespaced_secret("ci-token", ns).data or {}).get("token"):
            assert time.monotonic() < deadline, "the token was never filled in"
            time.sleep(0.1)
        data = core.read_namespaced_secret("ci-token", ns).data
        assert base64.b64decode(data["namespace"]) == ns.encode()
        root_ca = core.read_namespaced_config_map("kube-root-ca.crt", ns).data["ca.crt"]
        assert base64.b64decode(data["ca.crt"]).decode() == root_ca

        configuration = copy.copy(api_client.configuration)
        token = base64.b64decode(data["token"]).decode()
        configuration.api_key = {"BearerToken": f"Bearer {token}"}
        configuration.refresh_api_key_hook = None
        with client.ApiClient(configuration) as as_ci:
            pods = client.CoreV1Api(as_ci)
            refused = expect_status(403, pods.list_namespaced_pod, ns)
            assert json.loads(refused.body)["message"].startswith(
                f'pods is forbidden: User "system:serviceaccount:{ns}:ci" cannot list')
            core.delete_namespaced_service_account("ci", ns)
            wait_gone(core.read_namespaced_secret, "ci-token", ns)
            expect_status(401, pods.list_namespaced_pod, ns)
    finally:
        core.delete_namespace(ns)


def test_config_keys_and_secret_types_are_checked(core, namespace, unique):
    """Keys that are file paths, and Secrets missing what their type needs, are 422."""
    refused = expect_status(422, core.create_namespaced_config_map, namespace, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=f"paths-{unique}"), data={"conf/app.yaml": "x"}))
    assert json.loads(refused.body)["message"].startswith(
        f'ConfigMap "paths-{unique}" is invalid: data[conf/app.yaml]: Invalid value: '
        '"conf/app.yaml": a valid config key must consist of alphanumeric characters')
    refused = expect_status(422, core.create_namespaced_secret, namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name=f"tls-{unique}"), type="kubernetes.io/tls",
        string_data={"tls.crt": "cert"}))
    assert json.loads(refused.body)["message"] == (
        f'Secret "tls-{unique}" is invalid: data[tls.key]: Required value')


def test_quantities_and_quota(core, unique):
    """Quantities the client sends read back in kube's canonical form; a
    namespace's ResourceQuota charges pods and refuses one over it with kube's 403."""
    ns = f"quota-{unique}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    try:
        core.create_namespaced_resource_quota(ns, client.V1ResourceQuota(
            metadata=client.V1ObjectMeta(name="compute"),
            spec=client.V1ResourceQuotaSpec(hard={"pods": "1", "limits.memory": "1Gi"})))

        def sized(name):
            # (the client validates quantities as strings: kubectl's YAML numbers are
            # tested in crates/cluster's kubectl test)
            resources = {"limits": {"cpu": "1000m", "memory": "0.5Gi"}}
            return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": {"containers": [
                        {"name": "main", "image": "busybox:1.36", "resources": resources}]}}

        created = core.create_namespaced_pod(ns, sized("a"))
        resources = created.spec.containers[0].resources
        assert resources.limits == {"cpu": "1", "memory": "512Mi"}
        assert resources.requests == {"cpu": "1", "memory": "512Mi"}, "requests default to limits"
        assert created.status.qos_class == "Guaranteed"

        refused = expect_status(403, core.create_namespaced_pod, ns, sized("b"))
        body = json.loads(refused.body)
        assert body["reason"] == "Forbidden"
        assert body["message"] == ('pods "b" is forbidden: exceeded quota: compute, '
                                   'requested: pods=1, used: pods=1, limited: pods=1')
        used = core.read_namespaced_resource_quota("compute", ns).status.used
        assert used == {"pods": "1", "limits.memory": "512Mi"}
    finally:
        core.delete_namespace(ns)


def test_a_validating_admission_policy_refuses_and_can_be_removed(api_client, core, unique):
    """A ValidatingAdmissionPolicy written with the typed client refuses what its CEL
    refuses, with kube's message and 422, only where its namespaceSelector points."""
    admission = client.AdmissionregistrationV1Api(api_client)
    ns = f"vap-{unique}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name=ns, labels={"policy-test": unique})))
    policy_name = f"no-passwords-{unique}"
    admission.create_validating_admission_policy(client.V1ValidatingAdmissionPolicy(
        metadata=client.V1ObjectMeta(name=policy_name),
        spec=client.V1ValidatingAdmissionPolicySpec(
            match_constraints=client.V1MatchResources(
                namespace_selector=client.V1LabelSelector(match_labels={"policy-test": unique}),
                resource_rules=[client.V1NamedRuleWithOperations(
                    api_groups=[""], api_versions=["v1"], operations=["CREATE", "UPDATE"],
                    resources=["configmaps"])]),
            validations=[client.V1Validation(
                expression="!has(object.data) || !('password' in object.data)",
                message="secrets belong in Secrets")])))
    admission.create_validating_admission_policy_binding(
        client.V1ValidatingAdmissionPolicyBinding(
            metadata=client.V1ObjectMeta(name=policy_name),
            spec=client.V1ValidatingAdmissionPolicyBindingSpec(
                policy_name=policy_name, validation_actions=["Deny"])))
    try:
        stored = admission.read_validating_admission_policy(policy_name)
        assert stored.spec.failure_policy == "Fail"
        leaky = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="leaky"),
                                   data={"password": "hunter2"})
        refused = expect_status(422, core.create_namespaced_config_map, ns, leaky)
        assert json.loads(refused.body)["message"] == (
            f'configmaps "leaky" is forbidden: ValidatingAdmissionPolicy \'{policy_name}\' '
            f"with binding '{policy_name}' denied request: secrets belong in Secrets")
        core.create_namespaced_config_map(ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="fine"), data={"mode": "fast"}))
    finally:
        admission.delete_validating_admission_policy_binding(policy_name)
        admission.delete_validating_admission_policy(policy_name)
    core.create_namespaced_config_map(ns, leaky)
    core.delete_namespace(ns)
