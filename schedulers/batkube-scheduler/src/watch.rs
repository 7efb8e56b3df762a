//! Watches that pass the API's instant markers on.
//!
//! batkube's API delivers what happens at one simulated instant as one
//! batch, and a watch that asks for it (the header [`INSTANTS_HEADER`],
//! with bookmarks) gets a bookmark annotated [`INSTANT_BEGIN`]` = N` before
//! its first change of batch N, and one annotated [`INSTANT_END`]` = N`
//! after the batch. This watcher asks for named ends (`client=TOKEN;
//! watch=NAME`): the end comes only on the client's watches that saw a
//! change of the batch, each naming all of them ([`INSTANT_WATCHES`]), so
//! a watch with nothing new costs no frame per instant. A scheduler that
//! decides only when no watch is inside a batch and every watch named by
//! a batch's end has read its own end of it ([`Instants::settled`]) never
//! decides on part of an instant, however the bytes were cut on the way
//! (a batch larger than a socket's receive window arrives in pieces, as
//! the scheduler reads). kube-runtime's watcher swallows bookmarks, so this
//! is a watcher of its own with the same contract: list (in pages), then
//! watch from the list's resourceVersion, watch again when a watch ends,
//! relist when the version is too old (410), back off after errors.
//!
//! A watch between two streams (its timeout, an error, a relist) has
//! said nothing of what happened meanwhile: once it has spoken of instants
//! it counts as inside an unknown one until its next end marker (the API
//! gives one to every watch it registers), so the scheduler never decides
//! with one watch's replay and without another's. That end also stands
//! for the ends its previous stream may have lost: its replay brought it
//! up to that instant.
//!
//! A real API server ignores the header and sends no markers: every
//! watch then stays without a known instant and [`Instants::settled`] is
//! always true.

use std::collections::VecDeque;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::runtime::watcher::Event;
use kube::Resource;

/// The request header that asks for instant markers.
pub const INSTANTS_HEADER: &str = "x-batkube-instants";
/// The bookmark annotation before an instant's changes.
pub const INSTANT_BEGIN: &str = "batkube.io/instant-begin";
/// The bookmark annotation after an instant's changes.
pub const INSTANT_END: &str = "batkube.io/instant-end";
/// Beside the end: the names of the client's watches that saw a change of
/// the instant (each gets this end), joined by commas.
pub const INSTANT_WATCHES: &str = "batkube.io/instant-watches";

/// How long a watch request asks to last before it is made again.
const WATCH_TIMEOUT_SECONDS: u32 = 290;
/// List page size.
const PAGE: u32 = 500;
/// Backoff after a failed request: from the first, doubling up to the last
/// (kube-runtime's default, without its jitter, which would read a random
/// generator).
const BACKOFF_FIRST: Duration = Duration::from_millis(800);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// What a watch yields.
#[derive(Debug)]
pub enum Item<K> {
    /// A change, as kube-runtime's watcher gives it.
    Event(Event<K>),
    /// Instant N begins on this watch.
    Begin(u64),
    /// Instant N ended on this watch; the names of the client's watches
    /// that saw a change of it (each gets this end), if the API named them
    /// (not on the end of a watch's replay).
    End(u64, Option<String>),
    /// The watch's stream ended (its timeout, an error) or it lists
    /// again: what happens until its next stream is not known yet.
    Between,
}

enum Phase<K> {
    /// Listing; the continue token of the next page, if any.
    List { next: Option<String>, first: bool },
    /// Watching from `rv`; no stream when one is to be opened.
    Watch {
        rv: String,
        stream: Option<BoxStream<'static, kube::Result<WatchEvent<K>>>>,
    },
}

struct State<K: Clone> {
    api: Api<K>,
    /// The instants header's value.
    marks: String,
    phase: Phase<K>,
    backoff: Option<Duration>,
    out: VecDeque<Result<Item<K>, kube::Error>>,
}

/// List and watch `api` (all of it), yielding its changes and the
/// instants' markers, asking for ends named (the watch called `name`
/// among the process's watches); errors are yielded too (the watch goes on
/// after a backoff).
pub fn watch<K>(api: Api<K>, name: &str) -> impl Stream<Item = Result<Item<K>, kube::Error>> + Send
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    // The process is the API's client: its watches' ends name one another.
    let marks = format!("client={}; watch={name}", std::process::id());
    let state = State {
        api,
        marks,
        phase: Phase::List {
            next: None,
            first: true,
        },
        backoff: None,
        out: VecDeque::new(),
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.out.pop_front() {
                return Some((item, st));
            }
            st.step().await;
        }
    })
}

fn annotation(b: &kube::core::watch::Bookmark, key: &str) -> Option<u64> {
    b.metadata.annotations.get(key).and_then(|v| v.parse().ok())
}

impl<K> State<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    /// After a failure: waits (on the process's clock, simulated under the
    /// shim), longer each time until something succeeds.
    async fn back_off(&mut self, e: kube::Error) {
        self.out.push_back(Err(e));
        let d = self
            .backoff
            .map_or(BACKOFF_FIRST, |d| (d * 2).min(BACKOFF_MAX));
        self.backoff = Some(d);
        tokio::time::sleep(d).await;
    }

    async fn step(&mut self) {
        match &mut self.phase {
            Phase::List { next, first } => {
                let mut lp = ListParams::default().limit(PAGE);
                if let Some(t) = next.take() {
                    lp = lp.continue_token(&t);
                }
                let was_first = *first;
                match self.api.list(&lp).await {
                    Ok(list) => {
                        self.backoff = None;
                        if was_first {
                            self.out.push_back(Ok(Item::Event(Event::Init)));
                        }
                        for o in list.items {
                            self.out.push_back(Ok(Item::Event(Event::InitApply(o))));
                        }
                        match list.metadata.continue_.filter(|c| !c.is_empty()) {
                            Some(c) => {
                                self.phase = Phase::List {
                                    next: Some(c),
                                    first: false,
                                }
                            }
                            None => {
                                self.out.push_back(Ok(Item::Event(Event::InitDone)));
                                self.phase = Phase::Watch {
                                    rv: list.metadata.resource_version.unwrap_or_default(),
                                    stream: None,
                                };
                            }
                        }
                    }
                    Err(e) => {
                        // A failed page starts the list again.
                        self.phase = Phase::List {
                            next: None,
                            first: true,
                        };
                        self.back_off(e).await;
                    }
                }
            }
            Phase::Watch { rv, stream: None } => {
                let wp = WatchParams::default().timeout(WATCH_TIMEOUT_SECONDS);
                let opened = async {
                    let mut req = kube::core::Request::new(self.api.resource_url())
                        .watch(&wp, rv)
                        .map_err(kube::Error::BuildRequest)?;
                    req.extensions_mut().insert("watch");
                    req.headers_mut().insert(
                        INSTANTS_HEADER,
                        self.marks.parse().expect("a valid header value"),
                    );
                    self.api
                        .clone()
                        .into_client()
                        .request_events::<K>(req)
                        .await
                };
                let res = opened.await;
                tracing::trace!(
                    url = self.api.resource_url(),
                    rv,
                    ok = res.is_ok(),
                    "watch opened"
                );
                match res {
                    Ok(s) => {
                        if let Phase::Watch { stream, .. } = &mut self.phase {
                            *stream = Some(s.boxed());
                        }
                    }
                    Err(kube::Error::Api(s)) if s.code == 410 => self.relist(),
                    Err(e) => self.back_off(e).await,
                }
            }
            Phase::Watch {
                rv,
                stream: Some(s),
            } => match s.next().await {
                None => {
                    tracing::trace!(url = self.api.resource_url(), "watch ended");
                    // The watch ended (its timeout): watch again from here.
                    if let Phase::Watch { stream, .. } = &mut self.phase {
                        *stream = None;
                    }
                    self.out.push_back(Ok(Item::Between));
                }
                Some(Ok(ev)) => {
                    self.backoff = None;
                    match ev {
                        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                            if let Some(v) = &o.meta().resource_version {
                                *rv = v.clone();
                            }
                            self.out.push_back(Ok(Item::Event(Event::Apply(o))));
                        }
                        WatchEvent::Deleted(o) => {
                            if let Some(v) = &o.meta().resource_version {
                                *rv = v.clone();
                            }
                            self.out.push_back(Ok(Item::Event(Event::Delete(o))));
                        }
                        WatchEvent::Bookmark(b) => {
                            rv.clone_from(&b.metadata.resource_version);
                            if let Some(n) = annotation(&b, INSTANT_BEGIN) {
                                self.out.push_back(Ok(Item::Begin(n)));
                            }
                            if let Some(n) = annotation(&b, INSTANT_END) {
                                let names = b.metadata.annotations.get(INSTANT_WATCHES).cloned();
                                self.out.push_back(Ok(Item::End(n, names)));
                            }
                        }
                        WatchEvent::Error(e) if e.code == 410 => self.relist(),
                        WatchEvent::Error(e) => {
                            if let Phase::Watch { stream, .. } = &mut self.phase {
                                *stream = None;
                            }
                            self.out.push_back(Ok(Item::Between));
                            self.back_off(kube::Error::Api(e.into())).await;
                        }
                    }
                }
                Some(Err(e)) => {
                    if let Phase::Watch { stream, .. } = &mut self.phase {
                        *stream = None;
                    }
                    self.out.push_back(Ok(Item::Between));
                    self.back_off(e).await;
                }
            },
        }
    }

    fn relist(&mut self) {
        self.phase = Phase::List {
            next: None,
            first: true,
        };
        self.out.push_back(Ok(Item::Between));
    }
}

/// Where one watch stands in the API's instants.
#[derive(Debug, Clone, Copy, Default)]
struct Mark {
    /// An instant begun and not yet ended on this watch.
    open: Option<u64>,
    /// It has spoken of instants (a real API server's watches never do).
    spoke: bool,
    /// The last instant whose end it has read: nothing of it or before is
    /// owed on this watch.
    through: u64,
    /// Between two streams, after it has spoken of instants: it may be
    /// behind the others until its next end marker.
    between: bool,
}

/// The instants seen on a client's watches: whether what has been read
/// is a whole number of instants on every watch.
#[derive(Debug, Default)]
pub struct Instants {
    /// Each watch's name, as it asked for named ends.
    names: Vec<&'static str>,
    marks: Vec<Mark>,
    /// Instants whose end was read on some watch and not yet on every
    /// watch it named (a bit per watch).
    owed: Vec<(u64, u64)>,
}

impl Instants {
    /// Watches numbered from 0, each by the name it gives the API.
    pub fn new(names: &[&'static str]) -> Self {
        assert!(names.len() <= 64, "a bit per watch");
        Instants {
            names: names.to_vec(),
            marks: vec![Mark::default(); names.len()],
            owed: Vec::new(),
        }
    }

    /// Watch `w` yielded `item`.
    pub fn note<K>(&mut self, w: usize, item: &Item<K>) {
        if let Item::Begin(n) | Item::End(n, _) = item {
            tracing::trace!(
                watch = w,
                instant = n,
                begin = matches!(item, Item::Begin(_)),
                "instant marker"
            );
        }
        match item {
            Item::Begin(n) => {
                let m = &mut self.marks[w];
                m.open = Some(*n);
                m.spoke = true;
            }
            Item::End(n, names) => {
                let m = &mut self.marks[w];
                m.open = None;
                m.spoke = true;
                m.between = false;
                m.through = m.through.max(*n);
                if let Some(names) = names {
                    if !self.owed.iter().any(|(i, _)| i == n) {
                        // Every watch named owes its end, but one that has
                        // read a later end (its replay after a new stream)
                        // has caught up past it.
                        let mask = names
                            .split(',')
                            .filter_map(|name| self.names.iter().position(|k| *k == name))
                            .filter(|&b| self.marks[b].through < *n)
                            .fold(0u64, |m, b| m | 1 << b);
                        self.owed.push((*n, mask));
                    }
                }
                // Its end read, this watch owes nothing up to it.
                let through = self.marks[w].through;
                for (i, mask) in &mut self.owed {
                    if *i <= through {
                        *mask &= !(1 << w);
                    }
                }
                self.owed.retain(|(_, mask)| *mask != 0);
            }
            // A watch that never spoke of instants (a real API server)
            // stays silent after a new stream too.
            Item::Between => {
                let m = &mut self.marks[w];
                m.between = m.spoke;
            }
            Item::Event(_) => {}
        }
    }

    /// No watch is inside an instant or between streams, and every watch
    /// an instant's end named has read its own end of it.
    pub fn settled(&self) -> bool {
        self.owed.is_empty() && self.marks.iter().all(|m| m.open.is_none() && !m.between)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn begin(n: u64) -> Item<Pod> {
        Item::Begin(n)
    }
    /// The end of `n` naming the watches that saw a change of it.
    fn end(n: u64, names: &str) -> Item<Pod> {
        Item::End(n, Some(names.into()))
    }
    /// The end of `n` after a watch's replay (not named).
    fn replay_end(n: u64) -> Item<Pod> {
        Item::End(n, None)
    }
    fn change() -> Item<Pod> {
        Item::Event(Event::Apply(Pod::default()))
    }

    #[test]
    fn settled_only_once_every_watch_an_end_names_has_read_its_end() {
        let mut i = Instants::new(&["pods", "nodes"]);
        assert!(i.settled(), "no markers (a real API server): always");
        i.note(0, &begin(1));
        assert!(!i.settled(), "inside an instant");
        i.note(0, &change());
        i.note(0, &end(1, "pods"));
        assert!(i.settled(), "only the pods watch saw instant 1");
        // Both saw instant 2; the pods watch is read first.
        i.note(0, &begin(2));
        i.note(0, &change());
        i.note(0, &end(2, "nodes,pods"));
        assert!(!i.settled(), "the nodes watch's part of 2 is still unread");
        i.note(1, &begin(2));
        assert!(!i.settled());
        i.note(1, &change());
        i.note(1, &end(2, "nodes,pods"));
        assert!(i.settled());
        // Instant 3 (both) then 4 (pods only), the pods watch read ahead.
        i.note(0, &begin(3));
        i.note(0, &end(3, "nodes,pods"));
        i.note(0, &begin(4));
        i.note(0, &end(4, "pods"));
        assert!(!i.settled(), "4 is whole, 3 is not");
        i.note(1, &begin(3));
        i.note(1, &end(3, "nodes,pods"));
        assert!(i.settled());
        // The nodes watch read first this time.
        i.note(1, &begin(5));
        i.note(1, &end(5, "nodes,pods"));
        assert!(!i.settled());
        i.note(0, &begin(5));
        i.note(0, &end(5, "nodes,pods"));
        assert!(i.settled());
    }

    #[test]
    fn a_watch_started_again_holds_the_others_until_its_replay_ends() {
        let mut i = Instants::new(&["pods", "nodes"]);
        i.note(0, &begin(1));
        i.note(0, &end(1, "nodes,pods"));
        i.note(1, &begin(1));
        i.note(1, &end(1, "nodes,pods"));
        assert!(i.settled());
        // The nodes watch's stream ends (its timeout), and the pods watch
        // reads an instant that named it too: its part may be lost with
        // the old stream; its replay's end makes up for it.
        i.note(1, &Item::<Pod>::Between);
        assert!(!i.settled(), "watch 1 starts again");
        i.note(0, &begin(2));
        i.note(0, &end(2, "nodes,pods"));
        i.note(1, &change());
        assert!(!i.settled(), "a replay without its end is not a whole view");
        i.note(1, &replay_end(2));
        assert!(i.settled(), "the replay brought it through instant 2");
        // Its replay's end read before the other watch's end of an instant
        // naming it: it is not waited for.
        i.note(1, &Item::<Pod>::Between);
        i.note(1, &begin(3));
        i.note(1, &change());
        i.note(1, &Item::<Pod>::Between);
        i.note(1, &replay_end(3));
        assert!(i.settled());
        i.note(0, &begin(3));
        i.note(0, &end(3, "nodes,pods"));
        assert!(i.settled(), "watch 1 is through 3 already");
        // A relist inside an instant.
        i.note(0, &begin(4));
        i.note(0, &Item::<Pod>::Between);
        i.note(0, &Item::Event(Event::<Pod>::Init));
        assert!(!i.settled(), "a relist inside an instant");
        i.note(0, &end(4, "pods"));
        assert!(i.settled());
    }

    #[test]
    fn a_watch_that_never_spoke_of_instants_never_holds_the_others() {
        let mut i = Instants::new(&["pods", "nodes"]);
        i.note(0, &Item::<Pod>::Between);
        assert!(i.settled(), "a real API server: no markers, ever");
        i.note(1, &begin(1));
        i.note(1, &end(1, "nodes"));
        i.note(0, &Item::<Pod>::Between);
        assert!(i.settled());
    }

    #[test]
    fn an_unknown_name_is_not_waited_for() {
        let mut i = Instants::new(&["pods", "nodes"]);
        i.note(0, &begin(1));
        i.note(0, &end(1, "leases,pods"));
        assert!(i.settled());
    }
}
