//! No container engine runs on the project's machines, so the deployment
//! files are checked for structure: the sharded cluster the brief asks for,
//! wired the way MongoDB needs it.

use serde_yaml::Value;

use crate::helpers::repo_root;

fn compose() -> Value {
    let text = std::fs::read_to_string(repo_root().join("docker-compose.yml")).unwrap();
    let mut doc: Value = serde_yaml::from_str(&text).expect("docker-compose.yml is valid YAML");
    // Compose applies `<<: *anchor` merges; so must we, to see each service
    // as Compose does.
    doc.apply_merge().expect("merge keys");
    doc
}

fn command_of(service: &Value) -> String {
    match &service["command"] {
        Value::String(s) => s.clone(),
        Value::Sequence(parts) => parts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" "),
        Value::Null => String::new(),
        other => panic!("unexpected command {other:?}"),
    }
}

fn environment(service: &Value) -> Vec<(String, String)> {
    match &service["environment"] {
        Value::Mapping(m) => m
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().unwrap().to_owned(),
                    v.as_str().map_or_else(|| format!("{v:?}"), str::to_owned),
                )
            })
            .collect(),
        Value::Sequence(items) => items
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|s| s.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        _ => vec![],
    }
}

#[test]
fn compose_describes_a_sharded_cluster_with_two_three_member_shards() {
    let doc = compose();
    let services = doc["services"].as_mapping().expect("services");
    let names: Vec<&str> = services.keys().filter_map(Value::as_str).collect();

    let members = |set: &str, flag: &str| -> Vec<&str> {
        names
            .iter()
            .copied()
            .filter(|n| {
                let cmd = command_of(&doc["services"][*n]);
                cmd.contains("mongod")
                    && cmd.contains(flag)
                    && cmd.contains(&format!("--replSet {set}"))
            })
            .collect()
    };
    let config = members("configrs", "--configsvr");
    assert_eq!(config.len(), 3, "config server replica set: {config:?}");
    let shard1 = members("shard1", "--shardsvr");
    let shard2 = members("shard2", "--shardsvr");
    assert_eq!(shard1.len(), 3, "shard1 members: {shard1:?}");
    assert_eq!(shard2.len(), 3, "shard2 members: {shard2:?}");

    let mongos = &doc["services"]["mongos"];
    let mongos_cmd = command_of(mongos);
    assert!(mongos_cmd.starts_with("mongos"), "{mongos_cmd}");
    for member in &config {
        assert!(
            mongos_cmd.contains("configrs/") && mongos_cmd.contains(member),
            "mongos --configdb names {member}"
        );
    }

    // The one-shot init initiates the three replica sets and adds both shards.
    // Safe to start on one host: every mongod has a small cache and a
    // health check; mongos is not published beyond the loopback.
    for (name, service) in services.iter() {
        let command = command_of(service);
        if command.starts_with("mongod ") {
            assert!(
                command.contains("--wiredTigerCacheSizeGB"),
                "{name:?}: {command}"
            );
            assert!(
                service["healthcheck"]["test"].is_sequence(),
                "{name:?} health check"
            );
        }
    }
    let published: Vec<&str> = doc["services"]["mongos"]["ports"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        published.iter().all(|p| p.starts_with("127.0.0.1:")),
        "mongos published beyond loopback: {published:?}"
    );
    let init = &doc["services"]["init"];
    assert_eq!(init["restart"].as_str(), Some("no"));
    let script = command_of(init);
    for set in ["configrs", "shard1", "shard2"] {
        assert!(
            script.contains(&format!("_id: '{set}'"))
                || script.contains(&format!("_id: \"{set}\"")),
            "init initiates {set}"
        );
    }
    for member in config.iter().chain(&shard1).chain(&shard2) {
        assert!(
            script.contains(&format!("{member}:27017")),
            "init names {member}"
        );
    }
    assert!(
        script.contains("sh.addShard('shard1/") || script.contains("sh.addShard(\"shard1/"),
        "adds shard1"
    );
    assert!(
        script.contains("sh.addShard('shard2/") || script.contains("sh.addShard(\"shard2/"),
        "adds shard2"
    );

    // The app is built from this repository and points at mongos.
    let app = &doc["services"]["app"];
    assert_eq!(
        app["build"]["context"].as_str().or(app["build"].as_str()),
        Some(".")
    );
    let env = environment(app);
    let uri = env
        .iter()
        .find(|(k, _)| k == "MONGODB_URI")
        .map(|(_, v)| v.clone())
        .expect("app sets MONGODB_URI");
    assert!(uri.starts_with("mongodb://mongos:27017"), "{uri}");
    let depends: Vec<String> = match &app["depends_on"] {
        Value::Mapping(m) => m
            .keys()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Value::Sequence(s) => s
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => vec![],
    };
    assert!(
        depends.contains(&"setup".to_owned()),
        "app waits for the sharding setup: {depends:?}"
    );
    // Sharding is an explicit one-shot step after the cluster init.
    let setup = &doc["services"]["setup"];
    assert_eq!(command_of(setup), "setup --shard");
    assert!(setup["depends_on"]["init"].is_mapping());
    // Its journal is on a named volume at the image's data directory, so
    // acknowledged hits survive a container restart.
    let volumes: Vec<&str> = app["volumes"]
        .as_sequence()
        .expect("app mounts its journal")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        volumes.iter().any(|v| v.ends_with(":/var/lib/tickertape")),
        "{volumes:?}"
    );
    let named = volumes[0].split(':').next().unwrap();
    assert!(doc["volumes"][named].is_mapping(), "named volume {named}");
}

#[test]
fn the_dockerfile_is_multi_stage_and_runs_serve() {
    let text = std::fs::read_to_string(repo_root().join("Dockerfile")).unwrap();
    let stages = text
        .lines()
        .filter(|l| l.trim_start().to_ascii_uppercase().starts_with("FROM "))
        .count();
    assert!(stages >= 2, "build and runtime stages");
    assert!(text.contains("cargo build --release"));
    assert!(text.contains("\"serve\""));
    assert!(text.contains("TICKERTAPE_DATA_DIR=/var/lib/tickertape"));
    assert!(text.contains("VOLUME /var/lib/tickertape"));
}
