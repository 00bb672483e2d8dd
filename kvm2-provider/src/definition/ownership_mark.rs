//! The ownership mark in a domain's `<metadata>`: which Kubernetes object
//! owns the VM, which provider entry made it, and when.
//!
//! ```xml
//! <metadata>
//!   <kvm2:instance xmlns:kvm2="http://egress-proxies.invalid/xmlns/kvm2/1">
//!     <kvm2:owner-uid>6a1f...</kvm2:owner-uid>
//!     <kvm2:entry>kvm2-home</kvm2:entry>
//!     <kvm2:created-at>2026-12-02T09:15:16Z</kvm2:created-at>
//!     <kvm2:tags>team=net,tier=edge</kvm2:tags>   (optional)
//!   </kvm2:instance>
//! </metadata>
//! ```
//!
//! A domain without a mark, or with a mark that does not parse, is foreign:
//! the provider never modifies or deletes it. [`parse_mark`] therefore
//! matches elements by *namespace URI and local name* (the prefix is
//! whatever the document binds it to), rejects duplicates and incomplete
//! marks, and returns errors for any malformed input instead of panicking.
//!
//! `tags` holds the request's extra tags as `key=value` pairs joined by
//! commas (neither character can occur in a key or value); the ownership
//! tag itself is implied by the mark and never stored there.

use crate::Error;
use crate::timestamp::Timestamp;
use provider_api::{Identifier, MANAGED_BY_KEY, OwnerUid, TagValue, Tags};
use quick_xml::NsReader;
use quick_xml::events::{BytesRef, Event};
use quick_xml::name::{Namespace, ResolveResult};

/// The XML namespace of the mark. `.invalid` can never be registered, so no
/// one else can own this name.
pub const MARK_NAMESPACE: &str = "http://egress-proxies.invalid/xmlns/kvm2/1";

/// The prefix the provider binds [`MARK_NAMESPACE`] to when writing (also the
/// `key` for libvirt's `virDomainSetMetadata`).
pub const MARK_PREFIX: &str = "kvm2";

/// Local name of the mark's root element.
pub const MARK_ELEMENT: &str = "instance";

/// Longest field text read (whitespace included); valid fields are shorter.
const MAX_FIELD_LEN: usize = 256;

/// Longest `tags` field, written or read (about 30 tags of full length).
pub const MAX_TAGS_LEN: usize = 4096;

/// Largest document [`parse_mark`] reads. Domain XML dumps are a few KiB.
pub const MAX_DOCUMENT_LEN: usize = 1 << 20;

/// Who owns a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerMark {
    owner_uid: OwnerUid,
    entry: Identifier,
    created_at: Timestamp,
    tags: Tags,
}

impl OwnerMark {
    /// A mark for the object `owner_uid`, made by provider entry `entry`,
    /// with no extra tags.
    pub fn new(owner_uid: OwnerUid, entry: Identifier, created_at: Timestamp) -> Self {
        Self {
            owner_uid,
            entry,
            created_at,
            tags: Tags::new(),
        }
    }

    /// The mark with extra `tags` (see [`stored_tags`]).
    ///
    /// # Errors
    /// As [`stored_tags`].
    pub fn with_tags(mut self, tags: &Tags) -> Result<Self, Error> {
        self.tags = stored_tags(tags)?;
        Ok(self)
    }

    /// The extra tags (without the ownership tag).
    pub fn tags(&self) -> &Tags {
        &self.tags
    }

    /// The `tags` field's text: `key=value` pairs joined by commas, in key
    /// order; empty without tags.
    pub fn tags_text(&self) -> String {
        tags_text(&self.tags)
    }

    /// The owning object's UID.
    pub fn owner_uid(&self) -> &OwnerUid {
        &self.owner_uid
    }

    /// The provider entry that created the domain.
    pub fn entry(&self) -> &Identifier {
        &self.entry
    }

    /// When the domain was created.
    pub fn created_at(&self) -> Timestamp {
        self.created_at
    }
}

/// The tags a mark stores for a request's `tags`: all but a `managed-by`
/// key (the mark itself is that tag).
///
/// # Errors
/// [`Error::InvalidValue`] when they would encode to more than
/// [`MAX_TAGS_LEN`] bytes.
pub fn stored_tags(tags: &Tags) -> Result<Tags, Error> {
    let mut tags = tags.clone();
    tags.retain(|k, _| k.as_str() != MANAGED_BY_KEY);
    let len = tags_text(&tags).len();
    if len > MAX_TAGS_LEN {
        return Err(Error::InvalidValue {
            field: "tags",
            reason: format!(
                "{} tags encode to {len} bytes; at most {MAX_TAGS_LEN} are stored",
                tags.len()
            ),
        });
    }
    Ok(tags)
}

fn tags_text(tags: &Tags) -> String {
    tags.iter()
        .map(|(k, v)| format!("{}={}", k.as_str(), v.as_str()))
        .collect::<Vec<_>>()
        .join(",")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    OwnerUid,
    Entry,
    CreatedAt,
    Tags,
}

impl Field {
    fn from_local(name: &str) -> Option<Self> {
        match name {
            "owner-uid" => Some(Field::OwnerUid),
            "entry" => Some(Field::Entry),
            "created-at" => Some(Field::CreatedAt),
            "tags" => Some(Field::Tags),
            _ => None,
        }
    }

    fn max_len(self) -> usize {
        match self {
            Field::Tags => MAX_TAGS_LEN,
            _ => MAX_FIELD_LEN,
        }
    }
}

/// Where the reader is, relative to the mark.
#[derive(Clone, Copy)]
enum Position {
    /// Outside any mark.
    Outside,
    /// Directly inside the mark element, which opened at `mark`.
    InMark { mark: usize },
    /// Inside a field element (at depth `mark + 1`) of the mark at `mark`.
    InField { mark: usize, field: Field },
    /// Inside an element we skip, which opened at `until`; afterwards back
    /// in the mark at `mark`, or outside when `mark` is `None`.
    Skipping { mark: Option<usize>, until: usize },
}

#[derive(Default)]
struct Fields {
    owner_uid: Option<String>,
    entry: Option<String>,
    created_at: Option<String>,
    tags: Option<String>,
}

impl Fields {
    fn slot(&mut self, field: Field) -> &mut Option<String> {
        match field {
            Field::OwnerUid => &mut self.owner_uid,
            Field::Entry => &mut self.entry,
            Field::CreatedAt => &mut self.created_at,
            Field::Tags => &mut self.tags,
        }
    }
}

/// Reads the ownership mark from a domain XML dump (`virDomainGetXMLDesc`),
/// where it sits under `/domain/metadata`.
///
/// Returns `Ok(None)` when the document has no element in
/// [`MARK_NAMESPACE`] named [`MARK_ELEMENT`] there — a foreign domain.
/// Elements with the right local name in another namespace do not count.
///
/// # Errors
/// [`Error::XmlRead`] when the document is not well-formed XML or larger than
/// [`MAX_DOCUMENT_LEN`]; [`Error::MalformedMark`] when a mark is present but
/// duplicated, missing a field, has a field twice or a field that does not
/// parse (an absent `tags` field is no tags). Callers treat both as "not
/// ours".
pub fn parse_mark(domain_xml: &str) -> Result<Option<OwnerMark>, Error> {
    read_mark(domain_xml, Source::DomainXml)
}

/// Reads the ownership mark from the reply to `virDomainGetMetadata(ELEMENT,
/// MARK_NAMESPACE)`.
///
/// libvirt answers that call with the element *stripped of its namespace*
/// (`<instance><owner-uid>…`); the namespace is implied by the request, so
/// here unqualified names are accepted, elements in any other namespace are
/// not, and the mark must be the root. A domain without the mark makes
/// libvirt fail the call (`VIR_ERR_NO_DOMAIN_METADATA`) rather than return a
/// document.
///
/// # Errors
/// As [`parse_mark`], plus [`Error::MalformedMark`] when the root is not the
/// mark.
pub fn parse_metadata_reply(reply: &str) -> Result<OwnerMark, Error> {
    read_mark(reply, Source::MetadataReply)?.ok_or_else(|| malformed("the root is not the mark"))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    DomainXml,
    MetadataReply,
}

fn read_mark(document: &str, source: Source) -> Result<Option<OwnerMark>, Error> {
    if document.len() > MAX_DOCUMENT_LEN {
        return Err(Error::XmlRead {
            reason: format!("document is over {MAX_DOCUMENT_LEN} bytes"),
        });
    }
    let ours = Namespace(MARK_NAMESPACE);
    let mut reader = NsReader::from_str(document);
    let mut scan = Scan::new(source);
    loop {
        let (ns, event) = reader.read_resolved_event().map_err(|e| Error::XmlRead {
            reason: e.to_string(),
        })?;
        let in_ours = match ns {
            ResolveResult::Bound(n) => n == ours,
            // libvirt strips the namespace from metadata replies.
            ResolveResult::Unbound => source == Source::MetadataReply,
            ResolveResult::Unknown(_) => false,
        };
        match event {
            Event::Start(ref e) => scan.open(e.local_name().as_ref(), in_ours, false)?,
            Event::Empty(ref e) => scan.open(e.local_name().as_ref(), in_ours, true)?,
            Event::End(_) => scan.end(),
            Event::Text(t) => scan.text(&t.xml10_content())?,
            Event::CData(t) => scan.text(&t.xml10_content())?,
            Event::GeneralRef(r) => scan.text(resolve_reference(&r)?.encode_utf8(&mut [0; 4]))?,
            Event::Eof => break,
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) | Event::DocType(_) => {}
        }
    }
    match scan.finish()? {
        Some(fields) => fields.into_mark().map(Some),
        None => Ok(None),
    }
}

/// The reader's state over one document: where it is relative to the mark
/// and what the mark's fields hold so far.
struct Scan {
    source: Source,
    /// Local names from the root, to know where a mark sits.
    path: Vec<String>,
    position: Position,
    fields: Fields,
    marks: usize,
    saw_root: bool,
}

impl Scan {
    fn new(source: Source) -> Self {
        Self {
            source,
            path: Vec::new(),
            position: Position::Outside,
            fields: Fields::default(),
            marks: 0,
            saw_root: false,
        }
    }

    /// An element opens (`empty`: and closes at once).
    fn open(&mut self, local: &str, in_ours: bool, empty: bool) -> Result<(), Error> {
        let local = local.to_owned();
        if self.path.is_empty() {
            if self.saw_root {
                return Err(xml_err("more than one root element"));
            }
            self.saw_root = true;
        }
        let depth = self.path.len();
        self.position = self.position_inside(&local, in_ours, depth)?;
        if empty {
            self.position = close(self.position, depth);
        } else {
            self.path.push(local);
        }
        Ok(())
    }

    /// The position inside an element named `local` opening at `depth`.
    fn position_inside(
        &mut self,
        local: &str,
        in_ours: bool,
        depth: usize,
    ) -> Result<Position, Error> {
        Ok(match self.position {
            Position::Outside if in_ours && local == MARK_ELEMENT => {
                if mark_may_sit_at(&self.path, self.source) {
                    self.marks += 1;
                    if self.marks > 1 {
                        return Err(malformed("more than one mark"));
                    }
                    Position::InMark { mark: depth }
                } else {
                    // A mark somewhere else (e.g. inside a disk's metadata)
                    // is not the domain's mark.
                    Position::Skipping {
                        mark: None,
                        until: depth,
                    }
                }
            }
            Position::Outside => Position::Outside,
            Position::InMark { mark } => match Field::from_local(local) {
                Some(field) if in_ours => {
                    if self.fields.slot(field).is_some() {
                        return Err(malformed("a field appears twice"));
                    }
                    *self.fields.slot(field) = Some(String::new());
                    Position::InField { mark, field }
                }
                _ => Position::Skipping {
                    mark: Some(mark),
                    until: depth,
                },
            },
            Position::InField { .. } => return Err(malformed("a field contains an element")),
            p @ Position::Skipping { .. } => p,
        })
    }

    fn end(&mut self) {
        self.path.pop();
        self.position = close(self.position, self.path.len());
    }

    fn text(&mut self, text: &str) -> Result<(), Error> {
        match self.position {
            Position::InField { field, .. } => push_text(&mut self.fields, field, text),
            _ => Ok(()),
        }
    }

    /// The mark's fields, or `None` when the document has no mark.
    fn finish(self) -> Result<Option<Fields>, Error> {
        if !self.saw_root {
            return Err(xml_err("no root element"));
        }
        if !self.path.is_empty() {
            return Err(xml_err("the document ends inside an element"));
        }
        Ok((self.marks > 0).then_some(self.fields))
    }
}

impl Fields {
    /// The mark these fields spell: every field present (but `tags`) and
    /// parsed.
    fn into_mark(self) -> Result<OwnerMark, Error> {
        let owner_uid = self
            .owner_uid
            .ok_or_else(|| malformed("owner-uid is missing"))?;
        let entry = self.entry.ok_or_else(|| malformed("entry is missing"))?;
        let created_at = self
            .created_at
            .ok_or_else(|| malformed("created-at is missing"))?;
        let created_at = Timestamp::parse(created_at.trim())
            .ok_or_else(|| malformed("created-at is not YYYY-MM-DDTHH:MM:SSZ"))?;
        let owner_uid = OwnerUid::parse(owner_uid.trim())
            .map_err(|e| malformed(&format!("owner-uid {}", e.rule())))?;
        let entry = Identifier::parse(entry.trim())
            .map_err(|e| malformed(&format!("entry {}", e.rule())))?;
        let tags = match self.tags {
            Some(text) => parse_tags(text.trim())?,
            None => Tags::new(),
        };
        Ok(OwnerMark {
            owner_uid,
            entry,
            created_at,
            tags,
        })
    }
}

/// `key=value,key=value` (empty: no tags); a key twice, a missing `=`, or a
/// key or value that does not parse is malformed.
fn parse_tags(text: &str) -> Result<Tags, Error> {
    let mut tags = Tags::new();
    if text.is_empty() {
        return Ok(tags);
    }
    for pair in text.split(',') {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| malformed("a tag is not key=value"))?;
        let key = Identifier::parse(key.trim())
            .map_err(|e| malformed(&format!("tag key {}", e.rule())))?;
        let value = TagValue::parse(value.trim())
            .map_err(|e| malformed(&format!("tag value {}", e.rule())))?;
        if key.as_str() == MANAGED_BY_KEY || tags.insert(key, value).is_some() {
            return Err(malformed("a tag key appears twice"));
        }
    }
    Ok(tags)
}

/// The mark is the domain's when it is a direct child of `/domain/metadata`
/// (a domain dump) or the root (a metadata reply).
fn mark_may_sit_at(path: &[String], source: Source) -> bool {
    match (source, path) {
        (Source::MetadataReply, []) => true,
        (Source::DomainXml, [domain, metadata]) => domain == "domain" && metadata == "metadata",
        _ => false,
    }
}

/// The position after the element that opened at `depth` closes.
fn close(position: Position, depth: usize) -> Position {
    match position {
        Position::InMark { mark } if mark == depth => Position::Outside,
        Position::InField { mark, .. } if mark + 1 == depth => Position::InMark { mark },
        Position::Skipping { mark, until } if until == depth => match mark {
            Some(mark) => Position::InMark { mark },
            None => Position::Outside,
        },
        p => p,
    }
}

fn push_text(fields: &mut Fields, field: Field, text: &str) -> Result<(), Error> {
    let slot = fields.slot(field).get_or_insert_with(String::new);
    if slot.len() + text.len() > field.max_len() {
        return Err(malformed("a field is too long"));
    }
    slot.push_str(text);
    Ok(())
}

fn resolve_reference(r: &BytesRef<'_>) -> Result<char, Error> {
    if r.is_char_ref() {
        return match r.resolve_char_ref() {
            Ok(Some(c)) => Ok(c),
            Ok(None) | Err(_) => Err(xml_err("invalid character reference")),
        };
    }
    match r.xml10_content().as_ref() {
        "amp" => Ok('&'),
        "lt" => Ok('<'),
        "gt" => Ok('>'),
        "quot" => Ok('"'),
        "apos" => Ok('\''),
        _ => Err(xml_err("undefined entity reference")),
    }
}

fn malformed(reason: &str) -> Error {
    Error::MalformedMark {
        reason: reason.to_owned(),
    }
}

fn xml_err(reason: &str) -> Error {
    Error::XmlRead {
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `virsh dumpxml` of a domain rendered by `domain_xml` and defined on
    /// the sandbox's qemu:///system (libvirt 11.3): devices reordered,
    /// memory rewritten to KiB, UEFI loader resolved.
    const REAL_DUMP: &str = include_str!("../../testdata/domain-qemu-uefi.xml");
    /// `virsh metadata --uri MARK_NAMESPACE` of the same domain: libvirt
    /// strips the namespace.
    const REAL_REPLY: &str = include_str!("../../testdata/metadata-reply.xml");

    fn expected() -> OwnerMark {
        OwnerMark::new(
            OwnerUid::parse("6a1f0c2e-1111-4222-8333-944455556666").unwrap(),
            Identifier::parse("kvm2-home").unwrap(),
            Timestamp::parse("2026-12-02T09:15:16Z").unwrap(),
        )
    }

    fn dump_with(metadata: &str) -> String {
        format!("<domain type='kvm'><name>x</name><metadata>{metadata}</metadata></domain>")
    }

    const NS: &str = "http://egress-proxies.invalid/xmlns/kvm2/1";

    fn mark_xml(prefix: &str, body: &str) -> String {
        format!("<{prefix}:instance xmlns:{prefix}='{NS}'>{body}</{prefix}:instance>")
    }

    fn fields(prefix: &str) -> String {
        format!(
            "<{p}:owner-uid>6a1f0c2e-1111-4222-8333-944455556666</{p}:owner-uid>\
             <{p}:entry>kvm2-home</{p}:entry>\
             <{p}:created-at>2026-12-02T09:15:16Z</{p}:created-at>",
            p = prefix
        )
    }

    #[test]
    fn reads_a_real_libvirt_dump() {
        assert_eq!(parse_mark(REAL_DUMP).unwrap(), Some(expected()));
    }

    #[test]
    fn reads_a_real_metadata_reply() {
        assert_eq!(parse_metadata_reply(REAL_REPLY).unwrap(), expected());
    }

    #[test]
    fn a_namespace_less_mark_in_a_domain_dump_is_foreign() {
        // The reply's shape, pasted into a dump: no namespace, so not ours.
        let doc = dump_with(REAL_REPLY);
        assert_eq!(parse_mark(&doc).unwrap(), None);
    }

    #[test]
    fn any_prefix_bound_to_our_namespace_is_accepted() {
        let doc = dump_with(&mark_xml("zz", &fields("zz")));
        assert_eq!(parse_mark(&doc).unwrap(), Some(expected()));
        let default_ns = format!(
            "<instance xmlns='{NS}'>{}</instance>",
            fields("").replace("</:", "</").replace("<:", "<")
        );
        assert_eq!(
            parse_mark(&dump_with(&default_ns)).unwrap(),
            Some(expected())
        );
    }

    #[test]
    fn same_local_names_in_another_namespace_are_foreign() {
        let other = mark_xml("kvm2", &fields("kvm2")).replace(NS, "http://example.com/other");
        assert_eq!(parse_mark(&dump_with(&other)).unwrap(), None);
        // Fields from another namespace inside our mark do not count.
        let mixed = format!(
            "<kvm2:instance xmlns:kvm2='{NS}' xmlns:o='urn:o'>\
             <o:owner-uid>1</o:owner-uid><kvm2:entry>e</kvm2:entry>\
             <kvm2:created-at>2026-12-02T09:15:16Z</kvm2:created-at></kvm2:instance>"
        );
        assert!(matches!(
            parse_mark(&dump_with(&mixed)),
            Err(Error::MalformedMark { .. })
        ));
    }

    #[test]
    fn a_mark_outside_domain_metadata_is_foreign() {
        let doc = format!(
            "<domain><devices><disk>{}</disk></devices></domain>",
            mark_xml("kvm2", &fields("kvm2"))
        );
        assert_eq!(parse_mark(&doc).unwrap(), None);
        // The bare mark as a dump root is not a domain dump either.
        assert_eq!(
            parse_mark(&mark_xml("kvm2", &fields("kvm2"))).unwrap(),
            None
        );
    }

    #[test]
    fn no_mark_is_none() {
        assert_eq!(parse_mark("<domain><name>x</name></domain>").unwrap(), None);
        assert_eq!(
            parse_mark(&dump_with("<a:b xmlns:a='urn:a'/>")).unwrap(),
            None
        );
    }

    #[test]
    fn malformed_marks_are_errors() {
        let dup_mark = format!(
            "{}{}",
            mark_xml("kvm2", &fields("kvm2")),
            mark_xml("kvm2", &fields("kvm2"))
        );
        let dup_field = mark_xml(
            "kvm2",
            &format!("{}<kvm2:entry>x</kvm2:entry>", fields("kvm2")),
        );
        let missing = mark_xml("kvm2", "<kvm2:entry>kvm2-home</kvm2:entry>");
        let bad_time = mark_xml(
            "kvm2",
            &fields("kvm2").replace("09:15:16Z", "09:15:16+01:00"),
        );
        let bad_uid = mark_xml("kvm2", &fields("kvm2").replace("6a1f0c2e", "6a/f0c2e"));
        let bad_entry = mark_xml("kvm2", &fields("kvm2").replace(">kvm2-home<", ">Kvm2<"));
        let nested = mark_xml(
            "kvm2",
            &fields("kvm2").replace(">kvm2-home<", "><b/>kvm2-home<"),
        );
        let long = mark_xml(
            "kvm2",
            &fields("kvm2").replace("6a1f0c2e", &"a".repeat(300)),
        );
        for (name, doc) in [
            ("duplicate mark", dup_mark),
            ("duplicate field", dup_field),
            ("missing fields", missing),
            ("bad timestamp", bad_time),
            ("bad uid", bad_uid),
            ("bad entry", bad_entry),
            ("nested element", nested),
            ("long field", long),
        ] {
            let got = parse_mark(&dump_with(&doc));
            assert!(
                matches!(got, Err(Error::MalformedMark { .. })),
                "{name}: {got:?}"
            );
        }
    }

    fn tags(pairs: &[(&str, &str)]) -> Tags {
        pairs
            .iter()
            .map(|(k, v)| (Identifier::parse(k).unwrap(), TagValue::parse(v).unwrap()))
            .collect()
    }

    #[test]
    fn tags_are_read_from_dumps_and_metadata_replies() {
        let body = format!(
            "{}<kvm2:tags> team=net,tier=Edge.1 </kvm2:tags>",
            fields("kvm2")
        );
        let mark = parse_mark(&dump_with(&mark_xml("kvm2", &body)))
            .unwrap()
            .unwrap();
        assert_eq!(mark.tags(), &tags(&[("team", "net"), ("tier", "Edge.1")]));
        assert_eq!(mark.tags_text(), "team=net,tier=Edge.1");
        let reply = format!(
            "<instance>{}<tags>team=net</tags></instance>",
            fields("").replace("</:", "</").replace("<:", "<")
        );
        assert_eq!(
            parse_metadata_reply(&reply).unwrap().tags(),
            &tags(&[("team", "net")])
        );
        // No tags field, or an empty one: no tags.
        assert!(parse_mark(REAL_DUMP).unwrap().unwrap().tags().is_empty());
        let empty = format!("{}<kvm2:tags/>", fields("kvm2"));
        let mark = parse_mark(&dump_with(&mark_xml("kvm2", &empty)))
            .unwrap()
            .unwrap();
        assert!(mark.tags().is_empty());
    }

    #[test]
    fn malformed_tags_make_the_mark_malformed() {
        for bad in [
            "team",
            "team=net,team=web",
            "Team=net",
            "team=a b",
            "team=net,",
            "managed-by=egress-proxies",
            "=net",
        ] {
            let body = format!("{}<kvm2:tags>{bad}</kvm2:tags>", fields("kvm2"));
            let r = parse_mark(&dump_with(&mark_xml("kvm2", &body)));
            assert!(
                matches!(r, Err(Error::MalformedMark { .. })),
                "{bad}: {r:?}"
            );
        }
        let long = format!(
            "{}<kvm2:tags>{}</kvm2:tags>",
            fields("kvm2"),
            "a".repeat(MAX_TAGS_LEN + 1)
        );
        assert!(parse_mark(&dump_with(&mark_xml("kvm2", &long))).is_err());
    }

    #[test]
    fn stored_tags_drop_the_ownership_key_and_are_bounded() {
        let asked = tags(&[("managed-by", "someone-else"), ("team", "net")]);
        assert_eq!(stored_tags(&asked).unwrap(), tags(&[("team", "net")]));
        let many: Tags = (0..40)
            .map(|i| {
                (
                    Identifier::parse(&format!("key-{i:02}-{}", "k".repeat(50))).unwrap(),
                    TagValue::parse(&"v".repeat(64)).unwrap(),
                )
            })
            .collect();
        let err = stored_tags(&many).unwrap_err();
        assert!(
            matches!(err, Error::InvalidValue { field: "tags", .. }),
            "{err:?}"
        );
        assert!(err.is_permanent());
    }

    #[test]
    fn references_in_fields_are_resolved() {
        let doc = mark_xml(
            "kvm2",
            &fields("kvm2").replace("kvm2-home", "kvm2&#45;home"),
        );
        assert_eq!(parse_mark(&dump_with(&doc)).unwrap(), Some(expected()));
        let doc = mark_xml(
            "kvm2",
            &fields("kvm2").replace("kvm2-home", "kvm2&bogus;home"),
        );
        assert!(matches!(
            parse_mark(&dump_with(&doc)),
            Err(Error::XmlRead { .. })
        ));
    }

    #[test]
    fn broken_documents_are_errors() {
        for doc in [
            "",
            "<domain>",
            "<domain></other>",
            "<a/><b/>",
            "<domain><metadata><kvm2:instance>",
            "\u{0}",
        ] {
            assert!(parse_mark(doc).is_err(), "{doc:?} accepted");
        }
        let huge = format!("<domain>{}</domain>", " ".repeat(MAX_DOCUMENT_LEN));
        assert!(matches!(parse_mark(&huge), Err(Error::XmlRead { .. })));
    }

    #[test]
    fn metadata_reply_root_must_be_the_mark() {
        assert!(parse_metadata_reply("<other><owner-uid>a</owner-uid></other>").is_err());
        assert!(parse_metadata_reply(REAL_DUMP).is_err());
        let foreign_ns = REAL_REPLY.replace("<instance>", "<instance xmlns='urn:x'>");
        assert!(parse_metadata_reply(&foreign_ns).is_err());
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_text(s in "\\PC{0,200}") {
            let _ = parse_mark(&s);
            let _ = parse_metadata_reply(&s);
        }

        #[test]
        fn never_panics_on_truncated_or_mutated_dumps(
            cut in 0usize..REAL_DUMP.len(),
            pos in 0usize..REAL_DUMP.len(),
            byte in proptest::sample::select(&b"<>/&;:='\"x#"[..]),
        ) {
            let truncated = &REAL_DUMP.as_bytes()[..cut];
            let _ = parse_mark(&String::from_utf8_lossy(truncated));
            let mut mutated = REAL_DUMP.as_bytes().to_vec();
            mutated[pos] = byte;
            let _ = parse_mark(&String::from_utf8_lossy(&mutated));
        }
    }
}
