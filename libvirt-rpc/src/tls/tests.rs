use super::*;

/// A key-shaped PEM whose body is not base64: the parser's message quotes
/// the offending byte of the key (`~`, 126).
const SECRET_KEY: &[u8] =
    b"-----BEGIN PRIVATE KEY-----\nc2VjcmV0a2V5~\n-----END PRIVATE KEY-----\n";

fn chain_text(e: &Error) -> String {
    let mut text = format!("{e} {e:?}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(" / {s} {s:?}"));
        source = s.source();
    }
    text
}

#[test]
fn pem_without_certificates_names_the_part() {
    let e = TlsCredentials::from_pem(b"", b"", b"").unwrap_err();
    match &e {
        Error::TlsCredentials { file, path, .. } => {
            assert_eq!(*file, PkiFile::CaCert);
            assert!(path.is_none());
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("CA certificate"), "{e}");
}

#[test]
fn unreadable_file_names_the_file_and_path() {
    let paths = PkiPaths::in_dir("/nonexistent-lvrpc-pki");
    let e = TlsCredentials::from_files(&paths).unwrap_err();
    match &e {
        Error::TlsCredentials { file, path, .. } => {
            assert_eq!(*file, PkiFile::CaCert);
            assert_eq!(path.as_deref(), Some(paths.ca_cert.as_path()));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        e.to_string().contains("/nonexistent-lvrpc-pki/cacert.pem"),
        "{e}"
    );
}

#[test]
fn key_errors_never_quote_the_key() {
    let e = key_error(PrivateKeyDer::from_pem_slice(SECRET_KEY).unwrap_err());
    let err = credentials_error(PkiFile::ClientKey, None, e);
    let text = chain_text(&err);
    assert!(!text.contains("126") && !text.contains('~'), "{text}");
    assert!(text.contains("not a PEM private key"), "{text}");
    // Without the scrubbing the parser's own message does quote it.
    let raw = PrivateKeyDer::from_pem_slice(SECRET_KEY).unwrap_err();
    assert!(format!("{raw} {raw:?}").contains("126"), "{raw:?}");
}

#[tokio::test]
async fn a_name_that_is_neither_dns_nor_ip_is_refused_before_any_io() {
    let creds = TlsCredentials {
        config: Arc::new(
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
        ),
    };
    let (client, _server) = tokio::io::duplex(64);
    let e = creds
        .handshake(client, "not a host name", Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::TlsServerName { ref name } if name == "not a host name"),
        "{e:?}"
    );
}

#[test]
fn pki_file_names_are_libvirts() {
    assert_eq!(PkiFile::CaCert.file_name(), "cacert.pem");
    assert_eq!(PkiFile::ClientCert.file_name(), "clientcert.pem");
    assert_eq!(PkiFile::ClientKey.file_name(), "clientkey.pem");
}
