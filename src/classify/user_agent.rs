//! Browser, operating system and device class of a view, from its
//! User-Agent header and the screen width `tt.js` sends (`w`, CSS pixels).
//!
//! The browser and OS families come from the `ua-parser` crate with
//! uap-core's rules (`uap-core/regexes.json`); they are mapped onto
//! [`BROWSERS`] and [`OPERATING_SYSTEMS`], so a family we do not list, or a
//! User-Agent no rule matches, is "unknown". uap-core names no device class,
//! so that comes from the rules below (docs/classification.md repeats them):
//!
//! 1. A TV or a game console (`SMART-TV`, `Web0S`, `CrKey`, `AndroidTV`,
//!    `PlayStation`, `Xbox`, `Nintendo`…) is a desktop: a big screen seen
//!    from afar, laid out as on a desktop. Its width is not asked: TVs
//!    report 960 or 1280 CSS pixels at device-pixel ratio 2 or 1.5.
//! 2. `iPad`, Firefox's `; Tablet;`, `Kindle` and `Silk` are tablets.
//! 3. `Mobi` anywhere (`Mobile`, `Mobile Safari`, `IEMobile`), `iPhone`,
//!    `iPod`, `Opera Mini` are phones, whatever the width (an Android phone
//!    held sideways reports its longer side).
//! 4. Android without `Mobi` is a tablet, or a phone when the width is
//!    under 768.
//! 5. A desktop system (Windows, Linux, ChromeOS) is a desktop whatever
//!    the width: the User-Agent decides the class, and the width only
//!    refines within it (rule 6). A User-Agent naming no system (curl, a
//!    made-up one) is decided by the width when there is one: under 768
//!    mobile, 768 to 1023 tablet, 1024 and over desktop; without a width
//!    it is "unknown".
//! 6. Since iPadOS 13, Safari on an iPad sends the Mac's User-Agent, so a
//!    Mac User-Agent with a width under 1024 is an iPad (iPadOS), and one
//!    under 768 an iPhone asking for the desktop site (iOS). The 12.9 and
//!    13 inch iPad Pro (1024 and 1032 wide) cannot be told from a Mac and
//!    count as macOS desktops.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use ua_parser::{os, user_agent};

use super::UNKNOWN;

/// Every browser name a view can have. A parser family outside this list
/// counts as "unknown" (index 0).
pub const BROWSERS: &[&str] = &[
    UNKNOWN,
    "Chrome",
    "Chromium",
    "Safari",
    "Firefox",
    "Edge",
    "Opera",
    "Samsung Internet",
    "Android WebView",
    "iOS WebView",
    "Yandex",
    "UC Browser",
    "Vivaldi",
    "Brave",
    "DuckDuckGo",
    "Internet Explorer",
    "Silk",
    "Huawei Browser",
    "MIUI Browser",
    "QQ Browser",
    "Whale",
    "Coc Coc",
    "Facebook",
    "Instagram",
    "curl",
    "Wget",
];

/// Every operating system name a view can have ("unknown" is index 0).
pub const OPERATING_SYSTEMS: &[&str] = &[
    UNKNOWN,
    "Windows",
    "macOS",
    "iOS",
    "iPadOS",
    "Android",
    "Linux",
    "ChromeOS",
    "KaiOS",
    "Tizen",
    "webOS",
    "tvOS",
    "PlayStation",
    "Xbox",
    "Nintendo",
];

/// Below this screen width (CSS pixels) a device is a phone.
pub const TABLET_MIN_WIDTH: u32 = 768;
/// From this screen width on a device is a desktop (unless its
/// User-Agent says it is a phone or a tablet).
pub const DESKTOP_MIN_WIDTH: u32 = 1024;
const MAX_SCREEN_WIDTH: u32 = 10_000;
/// Only this much of a User-Agent is read. Real ones stay under 512 bytes
/// (in-app browsers' are the longest); a client sending megabytes must not
/// buy megabytes of regex work per hit.
pub const MAX_USER_AGENT_BYTES: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceClass {
    Desktop,
    Mobile,
    Tablet,
    Unknown,
}

impl DeviceClass {
    pub const ALL: [DeviceClass; 4] = [Self::Desktop, Self::Mobile, Self::Tablet, Self::Unknown];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Desktop => "desktop",
            Self::Mobile => "mobile",
            Self::Tablet => "tablet",
            Self::Unknown => UNKNOWN,
        }
    }

    fn of_width(width: u32) -> Self {
        if width < TABLET_MIN_WIDTH {
            Self::Mobile
        } else if width < DESKTOP_MIN_WIDTH {
            Self::Tablet
        } else {
            Self::Desktop
        }
    }
}

/// What a view's User-Agent (and screen width) tell: names from
/// [`BROWSERS`] and [`OPERATING_SYSTEMS`] only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    pub browser: &'static str,
    pub os: &'static str,
    pub class: DeviceClass,
}

/// The `w` parameter: a whole number of CSS pixels, 1 to 10000. Anything
/// else is no width (the User-Agent alone decides).
pub fn parse_screen_width(raw: &str) -> Option<u32> {
    if raw.is_empty() || raw.len() > 5 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse()
        .ok()
        .filter(|w| (1..=MAX_SCREEN_WIDTH).contains(w))
}

/// Classifies User-Agents. Built once per process (about 12 MB of
/// compiled rules, 0.1 s in a release build): [`UserAgentClassifier::new`]
/// hands out the same one each time, and clones share it.
#[derive(Clone)]
pub struct UserAgentClassifier {
    inner: Arc<Inner>,
}

struct Inner {
    browsers: user_agent::Extractor<'static>,
    systems: os::Extractor<'static>,
    cache: Cache,
}

impl Default for UserAgentClassifier {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for UserAgentClassifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserAgentClassifier")
            .finish_non_exhaustive()
    }
}

/// The part of uap-core's rules we use: its device rules name no class.
#[derive(Deserialize)]
struct Rules {
    user_agent_parsers: Vec<user_agent::Parser<'static>>,
    os_parsers: Vec<os::Parser<'static>>,
}

impl UserAgentClassifier {
    pub fn new() -> Self {
        static SHARED: OnceLock<Arc<Inner>> = OnceLock::new();
        let inner = SHARED.get_or_init(|| Arc::new(Inner::build()));
        Self {
            inner: Arc::clone(inner),
        }
    }

    pub fn classify(&self, user_agent: &str, screen_width: Option<u32>) -> Device {
        let user_agent = truncate(user_agent, MAX_USER_AGENT_BYTES);
        let found = self.inner.cache.get_or_insert(user_agent, || {
            Found::of(user_agent, &self.inner.browsers, &self.inner.systems)
        });
        found.device(screen_width)
    }
}

impl Inner {
    fn build() -> Self {
        // The rules ship inside the binary and a test loads them: failing
        // here is a build defect, not a condition to run without.
        let rules: Rules = serde_json::from_str(include_str!("uap-core/regexes.json"))
            .expect("uap-core/regexes.json is valid");
        let browsers = user_agent::Builder::new()
            .push_all(rules.user_agent_parsers)
            .expect("uap-core user agent rules compile")
            .build()
            .expect("uap-core user agent rules compile");
        let systems = os::Builder::new()
            .push_all(rules.os_parsers)
            .expect("uap-core OS rules compile")
            .build()
            .expect("uap-core OS rules compile");
        Self {
            browsers,
            systems,
            cache: Cache::new(),
        }
    }
}

/// What the User-Agent alone says; the width is applied afterwards.
/// Packs into a few bits so that the cache needs no lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Found {
    browser: u8,
    os: u8,
    form: Form,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// TVs and consoles (rule 1).
    BigScreen,
    Tablet,
    Phone,
    /// Android without `Mobi` (rule 4).
    AndroidTablet,
    /// A desktop system's User-Agent (rule 5): a desktop at any width.
    Desktop,
    /// A Mac's, which may be an iPad's or iPhone's (rule 6).
    Mac,
    Unknown,
}

const FORMS: [Form; 7] = [
    Form::BigScreen,
    Form::Tablet,
    Form::Phone,
    Form::AndroidTablet,
    Form::Desktop,
    Form::Mac,
    Form::Unknown,
];

impl Found {
    fn of(ua: &str, browsers: &user_agent::Extractor<'_>, systems: &os::Extractor<'_>) -> Self {
        let os = platform_os(ua)
            .unwrap_or_else(|| systems.extract(ua).map_or(UNKNOWN, |v| os_name(&v.os, ua)));
        let browser = browsers
            .extract(ua)
            .map_or(UNKNOWN, |v| browser_name(&v.family, os));
        Self {
            browser: index_of(BROWSERS, browser),
            os: index_of(OPERATING_SYSTEMS, os),
            form: form_of(ua, os),
        }
    }

    fn device(self, width: Option<u32>) -> Device {
        let browser = BROWSERS[usize::from(self.browser)];
        let os = OPERATING_SYSTEMS[usize::from(self.os)];
        let (os, class) = match (self.form, width) {
            (Form::BigScreen, _) => (os, DeviceClass::Desktop),
            (Form::Tablet, _) => (os, DeviceClass::Tablet),
            (Form::Phone, _) => (os, DeviceClass::Mobile),
            (Form::AndroidTablet, Some(w)) if w < TABLET_MIN_WIDTH => (os, DeviceClass::Mobile),
            (Form::AndroidTablet, _) => (os, DeviceClass::Tablet),
            (Form::Mac, Some(w)) => match DeviceClass::of_width(w) {
                DeviceClass::Mobile => ("iOS", DeviceClass::Mobile),
                DeviceClass::Tablet => ("iPadOS", DeviceClass::Tablet),
                class => (os, class),
            },
            (Form::Mac, None) => (os, DeviceClass::Desktop),
            // The User-Agent decides first: a desktop system stays a
            // desktop on a narrow screen (a window on a small laptop or a
            // scaled display), which would otherwise count as a tablet.
            (Form::Desktop, _) => (os, DeviceClass::Desktop),
            (Form::Unknown, Some(w)) => (os, DeviceClass::of_width(w)),
            (Form::Unknown, None) => (os, DeviceClass::Unknown),
        };
        Device { browser, os, class }
    }

    fn pack(self) -> u32 {
        let form = FORMS.iter().position(|f| *f == self.form).unwrap_or(0) as u32;
        (u32::from(self.browser) << 16) | (u32::from(self.os) << 8) | form
    }

    fn unpack(bits: u32) -> Self {
        let browser = (bits >> 16) as u8;
        let os = (bits >> 8) as u8;
        Self {
            browser: if usize::from(browser) < BROWSERS.len() {
                browser
            } else {
                0
            },
            os: if usize::from(os) < OPERATING_SYSTEMS.len() {
                os
            } else {
                0
            },
            form: FORMS
                .get((bits & 0xff) as usize)
                .copied()
                .unwrap_or(Form::Unknown),
        }
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let end = (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    &s[..end]
}

fn index_of(names: &[&str], name: &str) -> u8 {
    names.iter().position(|n| *n == name).unwrap_or(0) as u8
}

/// Consoles run browsers that uap-core either does not know or files
/// under the system they borrow from (Xbox under Windows).
fn platform_os(ua: &str) -> Option<&'static str> {
    [
        ("PlayStation", "PlayStation"),
        ("Xbox", "Xbox"),
        ("Nintendo", "Nintendo"),
    ]
    .into_iter()
    .find_map(|(token, os)| ua.contains(token).then_some(os))
}

fn os_name(family: &str, ua: &str) -> &'static str {
    match family {
        "Windows" => "Windows",
        "Mac OS X" | "Mac OS" => "macOS",
        // uap-core calls every Apple phone and tablet system iOS.
        "iOS" if ua.contains("iPad") => "iPadOS",
        "iOS" => "iOS",
        "Android" | "Chromecast Android" => "Android",
        "Chrome OS" => "ChromeOS",
        "Linux" | "Ubuntu" | "Kubuntu" | "Debian" | "Fedora" | "Red Hat" | "Linux Mint"
        | "Arch Linux" | "CentOS" | "Gentoo" | "Slackware" | "openSUSE" | "SUSE" | "Mandriva"
        | "PCLinuxOS" | "Puppy" => "Linux",
        "KaiOS" => "KaiOS",
        "Tizen" => "Tizen",
        "webOS" | "Web0S" => "webOS",
        "tvOS" | "ATV OS X" => "tvOS",
        // "Windows 10", "Windows XP"… in older rules, but not the phones.
        f if f.starts_with("Windows ") && !f.contains("Phone") && !f.contains("Mobile") => {
            "Windows"
        }
        _ => UNKNOWN,
    }
}

fn browser_name(family: &str, os: &str) -> &'static str {
    let name = match family {
        "Chrome" | "Chrome Mobile" | "Chrome Mobile iOS" | "Chrome Frame" => "Chrome",
        "Chromium" => "Chromium",
        "Safari" | "Mobile Safari" => "Safari",
        "Mobile Safari UI/WKWebView" => "iOS WebView",
        "Chrome Mobile WebView" => "Android WebView",
        "Edge" | "Edge Mobile" => "Edge",
        "Samsung Internet" => "Samsung Internet",
        "Yandex Browser" => "Yandex",
        "UC Browser" => "UC Browser",
        "Vivaldi" => "Vivaldi",
        "Brave" => "Brave",
        "DuckDuckGo" | "DuckDuckGo Mobile" => "DuckDuckGo",
        "IE" | "IE Mobile" | "IE Large Screen" => "Internet Explorer",
        "Amazon Silk" => "Silk",
        "Huawei Browser" => "Huawei Browser",
        "MiuiBrowser" => "MIUI Browser",
        "QQ Browser" | "QQ Browser Mini" | "QQ Browser Mobile" => "QQ Browser",
        "Whale" => "Whale",
        "Coc Coc" => "Coc Coc",
        "Facebook" | "Facebook Messenger" => "Facebook",
        "Instagram" => "Instagram",
        "curl" => "curl",
        "Wget" => "Wget",
        f if f == "Firefox" || f.starts_with("Firefox ") => "Firefox",
        f if f == "Opera" || f.starts_with("Opera ") => "Opera",
        _ => UNKNOWN,
    };
    // Safari runs only on Apple's systems: elsewhere uap-core's "Safari"
    // is a WebKit engine that names no browser (a TV's, a console's).
    if name == "Safari" && !matches!(os, "macOS" | "iOS" | "iPadOS") {
        UNKNOWN
    } else {
        name
    }
}

/// Rules 1 to 6 of the module's comment, as far as the User-Agent goes.
fn form_of(ua: &str, os: &str) -> Form {
    const BIG_SCREEN: &[&str] = &[
        "SMART-TV",
        "SmartTV",
        "Smart-TV",
        "SMARTTV",
        "Web0S",
        "webOS.TV",
        "HbbTV",
        "CrKey",
        "AndroidTV",
        "Android TV",
        "GoogleTV",
        "BRAVIA",
        "; AFT",
        "Roku",
        "AppleTV",
        "PlayStation",
        "Xbox",
        "Nintendo",
    ];
    const TABLET: &[&str] = &["iPad", "; Tablet;", "Kindle", "Silk/"];
    const PHONE: &[&str] = &["Mobi", "iPhone", "iPod", "Opera Mini"];
    let has = |tokens: &[&str]| tokens.iter().any(|t| ua.contains(t));
    if has(BIG_SCREEN) || matches!(os, "Tizen" | "webOS" | "tvOS") {
        Form::BigScreen
    } else if has(TABLET) || os == "iPadOS" {
        Form::Tablet
    } else if has(PHONE) || os == "iOS" || os == "KaiOS" {
        Form::Phone
    } else if os == "Android" {
        Form::AndroidTablet
    } else if os == "macOS" {
        Form::Mac
    } else if matches!(os, "Windows" | "Linux" | "ChromeOS") {
        Form::Desktop
    } else {
        Form::Unknown
    }
}

/// Remembers the last User-Agents seen: the same few thousand strings make
/// most of the traffic, and a parse costs microseconds where a hit here
/// costs a hash. Direct-mapped, one atomic word a slot: the top 32 bits of
/// a keyed hash of the User-Agent and the packed [`Found`]. The hash is
/// keyed per process, so no client can make its string pass for another's;
/// two strings sharing a slot only evict each other.
struct Cache {
    hasher: std::collections::hash_map::RandomState,
    slots: Box<[AtomicU64]>,
}

const CACHE_SLOTS: usize = 4096;
/// Set in every filled slot, so that an empty (zero) slot never matches.
const FILLED: u32 = 1 << 31;

impl Cache {
    fn new() -> Self {
        Self {
            hasher: std::collections::hash_map::RandomState::new(),
            slots: (0..CACHE_SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn get_or_insert(&self, ua: &str, parse: impl FnOnce() -> Found) -> Found {
        let hash = self.hasher.hash_one(ua);
        let slot = &self.slots[hash as usize % CACHE_SLOTS];
        let tag = hash >> 32;
        let word = slot.load(Ordering::Relaxed);
        if word >> 32 == tag && word as u32 & FILLED != 0 {
            return Found::unpack(word as u32 & !FILLED);
        }
        let found = parse();
        slot.store(
            (tag << 32) | u64::from(found.pack() | FILLED),
            Ordering::Relaxed,
        );
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table in `user_agents.tsv`: User-Agent, browser, OS, class and
    /// the width `tt.js` would send ("-" for none).
    fn table() -> Vec<(
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        Option<u32>,
    )> {
        include_str!("user_agents.tsv")
            .lines()
            .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
            .map(|line| {
                let f: Vec<&str> = line.split('\t').collect();
                assert_eq!(f.len(), 5, "five tab-separated fields: {line}");
                let width = (f[4] != "-").then(|| f[4].parse().expect("a width"));
                (f[0], f[1], f[2], f[3], width)
            })
            .collect()
    }

    #[test]
    fn every_row_of_the_table_of_real_user_agents_is_classified_as_expected() {
        let classifier = UserAgentClassifier::new();
        let rows = table();
        let distinct: std::collections::HashSet<_> = rows.iter().map(|r| r.0).collect();
        assert!(
            distinct.len() >= 40,
            "{} distinct User-Agents",
            distinct.len()
        );
        let mut wrong = Vec::new();
        for (ua, browser, os, class, width) in rows {
            let got = classifier.classify(ua, width);
            let got = (got.browser, got.os, got.class.as_str());
            if got != (browser, os, class) {
                wrong.push(format!(
                    "{ua} (w={width:?}): got {got:?}, want {:?}",
                    (browser, os, class)
                ));
            }
        }
        assert!(
            wrong.is_empty(),
            "{} wrong:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
    }

    #[test]
    fn a_second_call_answers_from_the_cache_with_the_same_device() {
        let classifier = UserAgentClassifier::new();
        for (ua, _, _, _, width) in table() {
            assert_eq!(
                classifier.classify(ua, width),
                classifier.classify(ua, width)
            );
        }
    }

    #[test]
    fn every_name_is_from_the_fixed_lists_whatever_the_client_sends() {
        let classifier = UserAgentClassifier::new();
        for ua in [
            "",
            " ",
            "Mozilla/5.0",
            "Mozilla/5.0 (X11; NewOS 1.0) NewBrowser/1.0",
            "Mozilla/5.0 (Linux; Android 14; K) AppleWebKit/537.36 (KHTML, like Gecko) EvilBrowser/1.0 Mobile Safari/537.36",
            "Opera 12 but not really",
            "Operations Dashboard for ArcGIS/10",
            "\u{0}\u{7f}\u{feff}\u{202e}",
            &"A".repeat(100_000),
        ] {
            for width in [None, Some(1), Some(800), Some(10_000)] {
                let d = classifier.classify(ua, width);
                assert!(BROWSERS.contains(&d.browser), "{ua}: {}", d.browser);
                assert!(OPERATING_SYSTEMS.contains(&d.os), "{ua}: {}", d.os);
            }
        }
        let made_up = "Mozilla/5.0 (X11; NewOS 1.0) NewBrowser/1.0";
        let d = classifier.classify(made_up, None);
        assert_eq!(
            (d.browser, d.os, d.class),
            (UNKNOWN, UNKNOWN, DeviceClass::Unknown)
        );
    }

    #[test]
    fn the_width_decides_only_where_the_user_agent_does_not() {
        let classifier = UserAgentClassifier::new();
        let class = |ua: &str, w: Option<u32>| classifier.classify(ua, w).class;
        let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1";
        let windows = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
        let tv = "Mozilla/5.0 (SMART-TV; LINUX; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) 76.0.3809.146/6.0 TV Safari/537.36";
        assert_eq!(class(iphone, Some(2000)), DeviceClass::Mobile);
        assert_eq!(class(tv, Some(300)), DeviceClass::Desktop);
        assert_eq!(class(windows, None), DeviceClass::Desktop);
        assert_eq!(class(windows, Some(1024)), DeviceClass::Desktop);
        assert_eq!(class("curl/8.5.0", None), DeviceClass::Unknown);
        assert_eq!(class("curl/8.5.0", Some(767)), DeviceClass::Mobile);
        assert_eq!(class("curl/8.5.0", Some(768)), DeviceClass::Tablet);
        assert_eq!(class("curl/8.5.0", Some(1023)), DeviceClass::Tablet);
        assert_eq!(class("curl/8.5.0", Some(1280)), DeviceClass::Desktop);
    }

    #[test]
    fn a_desktop_system_on_a_narrow_screen_stays_a_desktop() {
        // Real User-Agents of current desktop browsers, with the screen
        // widths GoatCounter's `s` and Umami's `screen` carry from small
        // laptops, scaled displays and portrait monitors.
        let classifier = UserAgentClassifier::new();
        let desktops = [
            (
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
                "Chrome",
                "Linux",
            ),
            (
                "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
                "Firefox",
                "Linux",
            ),
            (
                "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
                "Edge",
                "Windows",
            ),
            (
                "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
                "Chrome",
                "ChromeOS",
            ),
        ];
        for (ua, browser, os) in desktops {
            for width in [360, 767, 800, 1023, 1366, 2560] {
                let d = classifier.classify(ua, Some(width));
                assert_eq!(
                    (d.browser, d.os, d.class),
                    (browser, os, DeviceClass::Desktop),
                    "{ua} at {width}"
                );
            }
        }
        // Within its class the screen still refines: an iPad asking for
        // the desktop site says Macintosh and is told by its touch-size
        // screen; a phone's or a tablet's own User-Agent is not overruled
        // by a desktop-size width.
        let ipad_as_mac = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15";
        let d = classifier.classify(ipad_as_mac, Some(820));
        assert_eq!((d.os, d.class), ("iPadOS", DeviceClass::Tablet));
        let pixel = "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36";
        assert_eq!(
            classifier.classify(pixel, Some(1280)).class,
            DeviceClass::Mobile
        );
        let ipad = "Mozilla/5.0 (iPad; CPU OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1";
        assert_eq!(
            classifier.classify(ipad, Some(1366)).class,
            DeviceClass::Tablet
        );
    }

    #[test]
    fn a_mac_user_agent_on_an_ipad_or_iphone_screen_is_told_by_its_width() {
        let classifier = UserAgentClassifier::new();
        let mac = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15";
        let os_class = |w| {
            let d = classifier.classify(mac, w);
            (d.os, d.class)
        };
        assert_eq!(os_class(None), ("macOS", DeviceClass::Desktop));
        assert_eq!(os_class(Some(430)), ("iOS", DeviceClass::Mobile));
        assert_eq!(os_class(Some(744)), ("iOS", DeviceClass::Mobile));
        assert_eq!(os_class(Some(768)), ("iPadOS", DeviceClass::Tablet));
        assert_eq!(os_class(Some(834)), ("iPadOS", DeviceClass::Tablet));
        // The 12.9 inch iPad Pro: indistinguishable from a Mac.
        assert_eq!(os_class(Some(1024)), ("macOS", DeviceClass::Desktop));
        assert_eq!(os_class(Some(1280)), ("macOS", DeviceClass::Desktop));
    }

    #[test]
    fn screen_widths_are_whole_numbers_from_1_to_10000() {
        assert_eq!(parse_screen_width("1"), Some(1));
        assert_eq!(parse_screen_width("390"), Some(390));
        assert_eq!(parse_screen_width("10000"), Some(10_000));
        for bad in [
            "", "0", "10001", "99999", "123456", "-1", "+5", " 390", "390 ", "39.5", "1e3", "0x10",
            "٣٩٠",
        ] {
            assert_eq!(parse_screen_width(bad), None, "{bad:?}");
        }
        assert_eq!(parse_screen_width("0390"), Some(390));
    }

    #[test]
    fn only_the_start_of_a_huge_user_agent_is_read() {
        let classifier = UserAgentClassifier::new();
        let firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";
        let huge = format!("{firefox} {}", "é".repeat(1_000_000));
        let d = classifier.classify(&huge, None);
        assert_eq!((d.browser, d.os), ("Firefox", "Linux"));
        assert_eq!(truncate("aé", 2), "a");
        assert_eq!(truncate("aé", 3), "aé");
    }

    #[test]
    fn the_device_class_names_are_the_stored_ones() {
        let names: Vec<_> = DeviceClass::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names, ["desktop", "mobile", "tablet", "unknown"]);
    }

    #[test]
    fn the_classifier_is_shared_and_cheap_to_clone() {
        fn send_sync<T: Send + Sync + Clone>() {}
        send_sync::<UserAgentClassifier>();
        let a = UserAgentClassifier::new();
        let b = UserAgentClassifier::new();
        assert!(Arc::ptr_eq(&a.inner, &b.inner));
    }

    #[test]
    fn packing_keeps_every_found_value() {
        for browser in 0..BROWSERS.len() as u8 {
            for os in 0..OPERATING_SYSTEMS.len() as u8 {
                for form in FORMS {
                    let found = Found { browser, os, form };
                    assert_eq!(Found::unpack(found.pack()), found);
                }
            }
        }
    }
}
