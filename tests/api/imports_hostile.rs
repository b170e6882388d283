//! Hostile export files: refused cheaply while they stream, with bounded
//! memory and nothing written, to the database or to temporary space.
//! The files are made here, small on disk: their compressed streams are
//! built from one compressed block repeated, as a decompression bomb is.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::helpers::*;

const MIB: usize = 1 << 20;

/// Raw deflate blocks (not the last) of `data`, ending on a byte
/// boundary, that decompress to `data` whatever came before them.
fn deflate_blocks(data: &[u8]) -> Vec<u8> {
    let mut compress = flate2::Compress::new(flate2::Compression::best(), false);
    let mut out = Vec::with_capacity(data.len() / 100 + 1024);
    loop {
        let done = compress.total_in() as usize;
        if out.capacity() - out.len() < 1024 {
            out.reserve(64 * 1024);
        }
        compress
            .compress_vec(&data[done..], &mut out, flate2::FlushCompress::Sync)
            .unwrap();
        if compress.total_in() as usize == data.len() && out.capacity() > out.len() {
            break;
        }
    }
    out
}

/// A deflate stream of `head`, then `block` `times` times, then `tail`;
/// with the CRC-32 and length of what it decompresses to.
fn repeated_deflate(head: &[u8], block: &[u8], times: usize, tail: &[u8]) -> (Vec<u8>, u32, u64) {
    let mut out = deflate_blocks(head);
    let once = deflate_blocks(block);
    for _ in 0..times {
        out.extend_from_slice(&once);
    }
    out.extend_from_slice(&deflate_blocks(tail));
    // The last block: fixed codes, nothing but its end.
    out.extend_from_slice(&[0x03, 0x00]);
    let mut crc = flate2::Crc::new();
    crc.update(head);
    let mut block_crc = flate2::Crc::new();
    block_crc.update(block);
    for _ in 0..times {
        crc.combine(&block_crc);
    }
    crc.update(tail);
    let size = (head.len() + block.len() * times + tail.len()) as u64;
    (out, crc.sum(), size)
}

/// Runs `cmd` under `/usr/bin/time`, to its end or for a minute at most;
/// its output, and the most memory it held (resident, bytes).
fn run_measured(cmd: &Command) -> (std::process::Output, u64) {
    let mut measured = Command::new("/usr/bin/time");
    measured.arg("-f").arg("max-resident-kib=%M");
    measured.arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => measured.env(k, v),
            None => measured.env_remove(k),
        };
    }
    let out = crate::imports_plausible::output_within(measured, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kib: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("max-resident-kib="))
        .expect("/usr/bin/time's line")
        .trim()
        .parse()
        .unwrap();
    (out, kib * 1024)
}

/// Most memory an import may hold on these files: well under what they
/// expand to (400 MB, 2 GiB).
const MEMORY_BOUND: u64 = 150 << 20;

#[tokio::test]
async fn a_gzipped_goatcounter_export_with_a_400_mb_row_is_refused_at_once_in_bounded_memory() {
    let app = spawn_app().await;
    app.add_site("docs.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    // GoatCounter's header, then one row whose title is 400 MB of `a`.
    let head = "2Path,Title,Event,UserAgent,Browser,System,Session,Bot,Referrer,Referrer scheme,Screen size,Location,FirstVisit,Date\n/docs/,\"";
    let tail = "\",false,,Firefox 133,Linux,6a4e2c8f-0000-4000-8000-000000000001,0,,,\"1440,900,1\",NL,true,2026-10-13T10:00:00Z\n";
    let block = vec![b'a'; MIB];
    let (deflated, crc, size) = repeated_deflate(head.as_bytes(), &block, 400, tail.as_bytes());
    let file = dir.path().join("export-123.csv.gz");
    let mut gz = std::fs::File::create(&file).unwrap();
    gz.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff])
        .unwrap();
    gz.write_all(&deflated).unwrap();
    gz.write_all(&crc.to_le_bytes()).unwrap();
    gz.write_all(&(size as u32).to_le_bytes()).unwrap();
    drop(gz);
    assert!(std::fs::metadata(&file).unwrap().len() < 2 * MIB as u64);

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickertape"));
    cmd.args(["import", "goatcounter", "--site", "docs.test"])
        .arg(&file)
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", app.store.db().name())
        .env("RUST_LOG", "warn");
    let started = Instant::now();
    let (out, memory) = run_measured(&cmd);
    eprintln!("held at most {} MiB resident", memory >> 20);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains("export-123.csv.gz:2: a row over 64 KiB"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(30), "{stderr}");
    assert!(memory < MEMORY_BOUND, "{memory} bytes held: {stderr}");
    assert_eq!(app.bucket_count().await, 0);
}

/// One zip entry: its name, its bytes as stored (deflated or not), and
/// what they decompress to (CRC-32, size).
struct Entry<'a> {
    name: &'a str,
    data: &'a [u8],
    deflated: bool,
    crc: u32,
    size: u64,
}

/// A zip of `entries`, written field by field as the format has it.
fn write_zip(path: &Path, entries: &[Entry<'_>]) {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for e in entries {
        let offset = out.len() as u32;
        let method: u16 = if e.deflated { 8 } else { 0 };
        let fields = |out: &mut Vec<u8>| {
            out.extend_from_slice(&20u16.to_le_bytes()); // version needed
            out.extend_from_slice(&0u16.to_le_bytes()); // flags
            out.extend_from_slice(&method.to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes()); // time
            out.extend_from_slice(&0x5b21u16.to_le_bytes()); // date
            out.extend_from_slice(&e.crc.to_le_bytes());
            out.extend_from_slice(&(e.data.len() as u32).to_le_bytes());
            out.extend_from_slice(&(e.size as u32).to_le_bytes());
            out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes()); // extra
        };
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        fields(&mut out);
        out.extend_from_slice(e.name.as_bytes());
        out.extend_from_slice(e.data);
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes()); // made by
        fields(&mut central);
        central.extend_from_slice(&0u16.to_le_bytes()); // comment
        central.extend_from_slice(&0u16.to_le_bytes()); // disk
        central.extend_from_slice(&0u16.to_le_bytes()); // internal
        central.extend_from_slice(&0u32.to_le_bytes()); // external
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(e.name.as_bytes());
    }
    let at = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&at.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    std::fs::write(path, out).unwrap();
}

#[tokio::test]
async fn a_plausible_zip_bomb_is_refused_at_once_with_nothing_unpacked_and_bounded_memory() {
    let app = spawn_app().await;
    app.add_site("plausible.test", &[]).await;
    let dir = tempfile::tempdir().unwrap();
    // The visitors table: its header, then 2 GiB of line ends (empty
    // lines, which CSV skips: only the ratio can stop it).
    let header = b"date,visitors,pageviews,bounces,visits,visit_duration\n";
    let block = vec![b'\n'; MIB];
    let (bomb, bomb_crc, bomb_size) = repeated_deflate(header, &block, 2048, b"");
    assert_eq!(bomb_size, (2u64 << 30) + header.len() as u64);
    let pages = b"date,page,visitors,pageviews\n2026-10-13,/,1,1\n";
    let mut pages_crc = flate2::Crc::new();
    pages_crc.update(pages);
    let zip = dir.path().join("plausible-export.zip");
    write_zip(
        &zip,
        &[
            Entry {
                name: "imported_visitors_20261013_20261013.csv",
                data: &bomb,
                deflated: true,
                crc: bomb_crc,
                size: bomb_size,
            },
            Entry {
                name: "imported_pages_20261013_20261013.csv",
                data: pages,
                deflated: false,
                crc: pages_crc.sum(),
                size: pages.len() as u64,
            },
        ],
    );
    assert!(std::fs::metadata(&zip).unwrap().len() < 4 * MIB as u64);
    // Its own temporary directory, to see that nothing lands there.
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickertape"));
    cmd.args(["import", "plausible", "--site", "plausible.test"])
        .arg(&zip)
        .env("MONGODB_URI", database_uri())
        .env("TICKERTAPE_DATABASE", app.store.db().name())
        .env("TMPDIR", &tmp)
        .env("RUST_LOG", "warn");
    let started = Instant::now();
    let (out, memory) = run_measured(&cmd);
    eprintln!("held at most {} MiB resident", memory >> 20);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains("imported_visitors_20261013_20261013.csv")
            && stderr.contains("refused as a decompression bomb"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(30), "{stderr}");
    assert!(memory < MEMORY_BOUND, "{memory} bytes held: {stderr}");
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "nothing unpacked to TMPDIR"
    );
    assert_eq!(app.bucket_count().await, 0);
}

#[test]
fn the_built_streams_decompress_to_what_they_say() {
    let (deflated, crc, size) = repeated_deflate(b"head,", &[b'x'; 1000], 5, b",tail\n");
    let mut out = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::DeflateDecoder::new(&deflated[..]),
        &mut out,
    )
    .unwrap();
    assert_eq!(out.len() as u64, size);
    assert!(out.starts_with(b"head,xxx") && out.ends_with(b"xxx,tail\n"));
    let mut check = flate2::Crc::new();
    check.update(&out);
    assert_eq!(check.sum(), crc);
}
