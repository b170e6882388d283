//! The country of a view, from the client's address and an IP-to-country
//! database in MaxMind's format (`.mmdb`), read with the `maxminddb` crate.
//!
//! The install step (`make setup`) brings ip-location-db's
//! geo-whois-asn-country database (npm `@ip-location-db/geo-whois-asn-country-mmdb`)
//! into `.tools/geoip/`; an operator may point `TICKERTAPE_GEOIP_DB` at
//! their own file instead (MaxMind GeoLite2 or GeoIP2 Country or City,
//! DB-IP Country or City). Both record layouts are read: `country.iso_code`
//! (MaxMind, DB-IP) and `country_code` (ip-location-db).
//!
//! A missing or unreadable file is no error for the app: [`CountryDbState`]
//! says why, and every country is "unknown" until the file is fixed.
//! Addresses that name no place (private, loopback, link-local…) are
//! "unknown" without a lookup.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::UNKNOWN;

/// Overrides [`default_db_path`].
pub const DB_PATH_ENV: &str = "TICKERTAPE_GEOIP_DB";
/// Where the install step puts the shipped database, under the repository.
pub const SHIPPED_DB: &str = ".tools/geoip/geo-whois-asn-country.mmdb";

/// The database to open: `TICKERTAPE_GEOIP_DB` when set, else
/// [`SHIPPED_DB`] under the current directory when it is there (a
/// deployment that copied `.tools/geoip/`), else [`SHIPPED_DB`] under the
/// source tree this binary was built from (`make run`, `cargo test`: the
/// install step put it there).
pub fn default_db_path() -> PathBuf {
    resolve_db_path(std::env::var_os(DB_PATH_ENV), Path::is_file)
}

fn resolve_db_path(env: Option<std::ffi::OsString>, exists: impl Fn(&Path) -> bool) -> PathBuf {
    if let Some(path) = env.filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let here = Path::new(SHIPPED_DB);
    if exists(here) {
        return here.to_path_buf();
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join(SHIPPED_DB)
}

/// An ISO 3166-1 alpha-2 code in capitals, or unknown. Only two letters
/// A to Z are ever taken from a database; "ZZ", the code databases use
/// for "no country", is unknown too.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Country(Option<[u8; 2]>);

impl Country {
    pub const UNKNOWN: Country = Country(None);

    /// A code as a database writes it (either case); anything but two
    /// letters A to Z is unknown.
    pub fn from_code(code: &str) -> Self {
        match code.as_bytes() {
            &[a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => {
                let code = [a.to_ascii_uppercase(), b.to_ascii_uppercase()];
                if &code == b"ZZ" {
                    Self::UNKNOWN
                } else {
                    Self(Some(code))
                }
            }
            _ => Self::UNKNOWN,
        }
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Two ASCII capitals, checked in `from_code`.
            Some(code) => std::str::from_utf8(code).unwrap_or(UNKNOWN),
            None => UNKNOWN,
        }
    }

    pub fn is_known(&self) -> bool {
        self.0.is_some()
    }
}

impl fmt::Display for Country {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Country {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Country({})", self.as_str())
    }
}

/// What the admin system page shows about the database in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountryDbInfo {
    /// `database_type` from the file's metadata.
    pub name: String,
    /// `build_epoch` from the file's metadata.
    pub built: DateTime<Utc>,
    pub path: PathBuf,
    /// The credit the database's licence asks for, to show beside the
    /// countries; empty when the provider is not recognised.
    pub attribution: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CountryDbError {
    #[error("cannot read the country database {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: maxminddb::MaxMindDbError,
    },
    #[error("the country database {} has an impossible build date ({epoch})", path.display())]
    BuildDate { path: PathBuf, epoch: u64 },
}

/// An open database; clones share it. Read whole into memory (8 MB for
/// the shipped one) rather than mapped, so that replacing the file under a
/// running app cannot crash it; the new file is read at the next start.
#[derive(Clone)]
pub struct CountryDb {
    inner: Arc<Inner>,
}

struct Inner {
    reader: maxminddb::Reader<Vec<u8>>,
    info: CountryDbInfo,
}

impl fmt::Debug for CountryDb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountryDb")
            .field("info", &self.inner.info)
            .finish_non_exhaustive()
    }
}

/// The fields of a record we read, in either layout; every other field
/// is skipped.
#[derive(Deserialize)]
struct Record<'a> {
    #[serde(borrow)]
    country: Option<IsoCode<'a>>,
    #[serde(borrow)]
    country_code: Option<&'a str>,
}

#[derive(Deserialize)]
struct IsoCode<'a> {
    #[serde(borrow)]
    iso_code: Option<&'a str>,
}

impl CountryDb {
    pub fn open(path: &Path) -> Result<Self, CountryDbError> {
        let reader =
            maxminddb::Reader::open_readfile(path).map_err(|source| CountryDbError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        let meta = reader.metadata();
        let epoch = meta.build_epoch;
        let built = i64::try_from(epoch)
            .ok()
            .and_then(|secs| DateTime::from_timestamp(secs, 0))
            .ok_or_else(|| CountryDbError::BuildDate {
                path: path.to_path_buf(),
                epoch,
            })?;
        let info = CountryDbInfo {
            name: meta.database_type.clone(),
            built,
            path: path.to_path_buf(),
            attribution: attribution(&meta.database_type, path).to_owned(),
        };
        Ok(Self {
            inner: Arc::new(Inner { reader, info }),
        })
    }

    pub fn lookup(&self, ip: IpAddr) -> Country {
        let ip = ip.to_canonical();
        if !is_public(ip) {
            return Country::UNKNOWN;
        }
        // A damaged record is one unknown country, not a refused hit.
        let Ok(found) = self.inner.reader.lookup(ip) else {
            return Country::UNKNOWN;
        };
        match found.decode::<Record>() {
            Ok(Some(record)) => record
                .country
                .and_then(|c| c.iso_code)
                .or(record.country_code)
                .map_or(Country::UNKNOWN, Country::from_code),
            _ => Country::UNKNOWN,
        }
    }

    pub fn info(&self) -> &CountryDbInfo {
        &self.inner.info
    }
}

/// The database as the app holds it: open, or missing with the reason
/// (shown as a warning on the system page) and every country unknown.
#[derive(Debug, Clone)]
pub enum CountryDbState {
    Loaded(CountryDb),
    Missing { path: PathBuf, why: String },
}

impl CountryDbState {
    /// Opens `path`; a failure is logged as a warning and kept as
    /// [`CountryDbState::Missing`].
    pub fn load(path: &Path) -> Self {
        match CountryDb::open(path) {
            Ok(db) => Self::Loaded(db),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "no country database: every country is \"unknown\"");
                Self::Missing {
                    path: path.to_path_buf(),
                    why: e.to_string(),
                }
            }
        }
    }

    pub fn lookup(&self, ip: IpAddr) -> Country {
        match self {
            Self::Loaded(db) => db.lookup(ip),
            Self::Missing { .. } => Country::UNKNOWN,
        }
    }

    pub fn info(&self) -> Option<&CountryDbInfo> {
        match self {
            Self::Loaded(db) => Some(db.info()),
            Self::Missing { .. } => None,
        }
    }
}

const MAXMIND_GEOLITE: &str = "This product includes GeoLite2 data created by MaxMind, available from https://www.maxmind.com";
const MAXMIND_GEOIP: &str = "GeoIP2 data by MaxMind (https://www.maxmind.com)";
const DBIP: &str = "IP Geolocation by DB-IP (https://db-ip.com), CC BY 4.0";
const IP_LOCATION_DB: &str = "geo-whois-asn-country by ip-location-db (sapics), CC0; \
     from RIR data of the NRO (https://www.nro.net), CC BY 4.0";

/// The credit a licence asks for, told from the metadata's
/// `database_type` (MaxMind and DB-IP name themselves there) or the file
/// name (ip-location-db writes only "country ipv4" or the like, also for
/// its GeoLite2 and DB-IP conversions, so the name comes first).
fn attribution(database_type: &str, path: &Path) -> &'static str {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let kind = database_type.to_ascii_lowercase();
    if file.contains("geolite2") || kind.contains("geolite2") {
        MAXMIND_GEOLITE
    } else if file.contains("dbip") || file.contains("db-ip") || kind.contains("dbip") {
        DBIP
    } else if kind.contains("geoip2") {
        MAXMIND_GEOIP
    } else if file.contains("geo-whois-asn-country") {
        IP_LOCATION_DB
    } else {
        ""
    }
}

/// Whether an address may belong to a place: not private, shared (CGNAT),
/// loopback, link-local, unspecified, broadcast, multicast or reserved
/// for documentation.
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    let shared = a == 100 && (64..128).contains(&b);
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || shared
        || a == 0
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let documentation = ip.segments()[..2] == [0x2001, 0x0db8];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_unique_local()
        || ip.is_unicast_link_local()
        || documentation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::OnceLock;

    /// The shipped database, found as the app finds it. `make test` (and
    /// `make setup`) install it; without it these tests fail rather than
    /// skip, since country lookups must work with the database we ship.
    fn shipped() -> &'static CountryDb {
        static DB: OnceLock<CountryDb> = OnceLock::new();
        DB.get_or_init(|| {
            let path = default_db_path();
            CountryDb::open(&path).unwrap_or_else(|e| {
                panic!("{e}\nthe shipped country database is installed by `make setup` (see Makefile, GEOIP)")
            })
        })
    }

    fn country(ip: &str) -> String {
        shipped()
            .lookup(ip.parse().expect("an address"))
            .as_str()
            .to_owned()
    }

    #[test]
    fn known_public_addresses_have_their_country() {
        for (ip, want) in [
            ("8.8.8.8", "US"),                  // Google Public DNS
            ("1.1.1.1", "AU"),                  // APNIC's research range, lent to Cloudflare
            ("193.99.144.80", "DE"),            // heise.de, Hannover
            ("77.88.8.8", "RU"),                // Yandex DNS
            ("133.242.0.3", "JP"),              // SAKURA Internet, in a Japanese /8
            ("210.130.0.1", "JP"),              // IIJ
            ("2001:4860:4860::8888", "US"),     // Google Public DNS over IPv6
            ("2a01:238::1", "DE"),              // Strato, Berlin
            ("2a00:1450:4001:80b::200e", "IE"), // Google's European range
            ("::ffff:8.8.8.8", "US"),           // IPv4-mapped
        ] {
            assert_eq!(country(ip), want, "{ip}");
        }
    }

    #[test]
    fn addresses_that_name_no_place_are_unknown() {
        for ip in [
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "100.64.0.1",
            "127.0.0.1",
            "169.254.1.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "192.0.2.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:192.168.1.1",
        ] {
            assert_eq!(country(ip), UNKNOWN, "{ip}");
        }
    }

    #[test]
    fn a_public_address_missing_from_the_database_is_unknown() {
        // Outside 2000::/3, the only IPv6 space the registries hand out,
        // yet no special-purpose range we skip: a lookup that finds nothing.
        let db = shipped();
        let ip: IpAddr = "4000::1".parse().unwrap();
        assert!(is_public(ip));
        assert!(db
            .inner
            .reader
            .lookup(ip)
            .is_ok_and(|found| !found.has_data()));
        assert_eq!(db.lookup(ip), Country::UNKNOWN);
    }

    #[test]
    fn the_shipped_database_says_what_it_is_and_whom_to_credit() {
        let info = shipped().info();
        assert!(info.name.starts_with("country"), "{}", info.name);
        assert!(info.built > DateTime::from_timestamp(1_700_000_000, 0).unwrap());
        assert!(info.path.ends_with("geo-whois-asn-country.mmdb"));
        assert_eq!(info.attribution, IP_LOCATION_DB);
    }

    #[test]
    fn a_missing_file_is_an_error_that_the_state_keeps_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.mmdb");
        let err = CountryDb::open(&path).unwrap_err();
        assert!(err.to_string().contains("absent.mmdb"), "{err}");

        let state = CountryDbState::load(&path);
        let CountryDbState::Missing { path: p, why } = &state else {
            panic!("{state:?}");
        };
        assert_eq!(p, &path);
        assert!(!why.is_empty());
        assert!(state.info().is_none());
        assert_eq!(state.lookup("8.8.8.8".parse().unwrap()), Country::UNKNOWN);
    }

    #[test]
    fn a_file_that_is_no_database_is_missing_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("garbage.mmdb");
        std::fs::write(&path, b"not a MaxMind database").unwrap();
        assert!(matches!(
            CountryDbState::load(&path),
            CountryDbState::Missing { .. }
        ));
    }

    #[test]
    fn only_two_letters_make_a_country() {
        assert_eq!(Country::from_code("de").as_str(), "DE");
        assert_eq!(Country::from_code("US").as_str(), "US");
        for bad in ["", "U", "USA", "U1", "ZZ", "zz", "ÄÖ", "--", "u\u{0}"] {
            assert_eq!(Country::from_code(bad), Country::UNKNOWN, "{bad:?}");
        }
        assert_eq!(Country::UNKNOWN.as_str(), UNKNOWN);
    }

    #[test]
    fn attribution_follows_the_provider() {
        let p = |name: &str| PathBuf::from("/x").join(name);
        assert_eq!(
            attribution("GeoLite2-Country", &p("GeoLite2-Country.mmdb")),
            MAXMIND_GEOLITE
        );
        assert_eq!(
            attribution("GeoLite2-City", &p("city.mmdb")),
            MAXMIND_GEOLITE
        );
        assert_eq!(attribution("GeoIP2-Country", &p("c.mmdb")), MAXMIND_GEOIP);
        assert_eq!(
            attribution("DBIP-Country-Lite", &p("dbip-country-lite-2026-06.mmdb")),
            DBIP
        );
        assert_eq!(
            attribution("country ipv4", &p("dbip-country-ipv4.mmdb")),
            DBIP
        );
        assert_eq!(
            attribution("country ipvAll", &p("geo-whois-asn-country.mmdb")),
            IP_LOCATION_DB
        );
        assert_eq!(attribution("country ipvAll", &p("mine.mmdb")), "");
    }

    #[test]
    fn the_environment_variable_then_the_current_directory_then_the_source_tree() {
        let mine = Some("/srv/GeoLite2-Country.mmdb".into());
        assert_eq!(
            resolve_db_path(mine, |_| true),
            PathBuf::from("/srv/GeoLite2-Country.mmdb")
        );
        assert_eq!(
            resolve_db_path(Some("".into()), |_| true),
            PathBuf::from(SHIPPED_DB)
        );
        assert_eq!(resolve_db_path(None, |_| true), PathBuf::from(SHIPPED_DB));
        assert_eq!(
            resolve_db_path(None, |_| false),
            Path::new(env!("CARGO_MANIFEST_DIR")).join(SHIPPED_DB)
        );
    }

    #[test]
    fn the_database_is_shared_between_threads() {
        fn send_sync<T: Send + Sync + Clone>() {}
        send_sync::<CountryDb>();
        send_sync::<CountryDbState>();
    }
}
