//! Storage pool and volume calls shared by the image cache, Create and
//! Delete: each one observed (one span and debug line, see
//! [`observed`](crate::libvirt::observed)) and bounded by its connection's per-call
//! deadline, with libvirt failures turned into provider errors that name the
//! host.

use libvirt_rpc::{
    Client, Error as RpcError, StoragePool, StorageVol, StorageVolCreateFlags,
    StorageVolDeleteFlags, StorageVolInfoFlags, StorageVolStreamFlags,
};
use provider_api::error::chain;
use provider_api::{Error as ApiError, Identifier};

use super::volume_xml::raw_volume;
use crate::libvirt::{is_absent, observed, to_provider_error};
use libvirt_rpc::proc_num;

/// One host's pool, reached through one client.
pub(crate) struct PoolOps<'a> {
    pub(crate) host: &'a Identifier,
    pub(crate) client: &'a Client,
    pub(crate) pool: StoragePool,
}

impl<'a> PoolOps<'a> {
    /// Looks `pool` up on `host`.
    pub(crate) async fn open(
        host: &'a Identifier,
        client: &'a Client,
        pool: &Identifier,
    ) -> Result<Self, ApiError> {
        let handle = observed(
            host,
            proc_num::STORAGE_POOL_LOOKUP_BY_NAME,
            client.storage_pool_lookup_by_name(pool.as_str()),
        )
        .await
        .map_err(|e| to_provider_error(format!("host {host}: look up pool {pool}"), e))?;
        Ok(Self {
            host,
            client,
            pool: handle,
        })
    }

    fn err(&self, what: String, e: RpcError) -> ApiError {
        to_provider_error(
            format!("host {}: pool {}: {what}", self.host, self.pool.name),
            e,
        )
    }

    /// The volume named `name`, or `None` when there is none.
    pub(crate) async fn find(&self, name: &str) -> Result<Option<StorageVol>, ApiError> {
        match observed(
            self.host,
            proc_num::STORAGE_VOL_LOOKUP_BY_NAME,
            self.client.storage_vol_lookup_by_name(&self.pool, name),
        )
        .await
        {
            Ok(vol) => Ok(Some(vol)),
            Err(e) if is_absent(&e) => Ok(None),
            Err(e) => Err(self.err(format!("look up volume {name}"), e)),
        }
    }

    /// Deletes the volume named `name` if it exists; true when it did.
    pub(crate) async fn remove(&self, name: &str) -> Result<bool, ApiError> {
        let Some(vol) = self.find(name).await? else {
            return Ok(false);
        };
        match observed(
            self.host,
            proc_num::STORAGE_VOL_DELETE,
            self.client
                .storage_vol_delete(&vol, StorageVolDeleteFlags::empty()),
        )
        .await
        {
            Ok(()) => Ok(true),
            // Deleted meanwhile: the outcome we wanted.
            Err(e) if is_absent(&e) => Ok(true),
            Err(e) => Err(self.err(format!("delete volume {name}"), e)),
        }
    }

    /// Creates a volume from `xml`.
    pub(crate) async fn create(&self, name: &str, xml: &str) -> Result<StorageVol, ApiError> {
        observed(
            self.host,
            proc_num::STORAGE_VOL_CREATE_XML,
            self.client
                .storage_vol_create_xml(&self.pool, xml, StorageVolCreateFlags::empty()),
        )
        .await
        .map_err(|e| self.err(format!("create volume {name}"), e))
    }

    /// The volume's path on the host.
    pub(crate) async fn path(&self, vol: &StorageVol) -> Result<String, ApiError> {
        observed(
            self.host,
            proc_num::STORAGE_VOL_GET_PATH,
            self.client.storage_vol_get_path(vol),
        )
        .await
        .map_err(|e| self.err(format!("path of volume {}", vol.name), e))
    }

    /// The volume's capacity: the size of the disk it holds (a qcow2
    /// image's virtual size, as libvirt probes it).
    pub(crate) async fn capacity(&self, vol: &StorageVol) -> Result<u64, ApiError> {
        observed(
            self.host,
            proc_num::STORAGE_VOL_GET_INFO,
            self.client.storage_vol_get_info(vol),
        )
        .await
        .map(|info| info.capacity)
        .map_err(|e| self.err(format!("capacity of volume {}", vol.name), e))
    }

    /// The volume's length on the host (a file's size, whatever format
    /// libvirt probed it as).
    pub(crate) async fn physical(&self, vol: &StorageVol) -> Result<u64, ApiError> {
        observed(
            self.host,
            proc_num::STORAGE_VOL_GET_INFO_FLAGS,
            self.client
                .storage_vol_get_info_flags(vol, StorageVolInfoFlags::GET_PHYSICAL),
        )
        .await
        .map(|info| info.allocation)
        .map_err(|e| self.err(format!("size of volume {}", vol.name), e))
    }

    /// Bytes free in the pool, after asking the daemon to rescan it (a `dir`
    /// pool's figure is otherwise as old as its last refresh). A refused
    /// refresh (another job running in the pool) is not an error: the
    /// older figure is used.
    pub(crate) async fn available(&self) -> Result<u64, ApiError> {
        if let Err(e) = observed(
            self.host,
            proc_num::STORAGE_POOL_REFRESH,
            self.client
                .storage_pool_refresh(&self.pool, libvirt_rpc::NoFlags::empty()),
        )
        .await
        {
            tracing::debug!(host = %self.host, pool = %self.pool.name, error = %chain(&e), "pool refresh refused; using the last figure");
        }
        observed(
            self.host,
            proc_num::STORAGE_POOL_GET_INFO,
            self.client.storage_pool_get_info(&self.pool),
        )
        .await
        .map(|info| info.available)
        .map_err(|e| self.err("free space".to_owned(), e))
    }

    /// Creates a raw volume named `name` holding exactly `bytes`.
    pub(crate) async fn write_small(
        &self,
        name: &str,
        bytes: &[u8],
    ) -> Result<StorageVol, ApiError> {
        let xml = raw_volume(name, bytes.len() as u64).map_err(ApiError::from)?;
        let vol = self.create(name, &xml).await?;
        observed(
            self.host,
            proc_num::STORAGE_VOL_UPLOAD,
            self.client.storage_vol_upload(
                &vol,
                0,
                bytes.len() as u64,
                StorageVolStreamFlags::empty(),
                bytes,
            ),
        )
        .await
        .map_err(|e| self.err(format!("write volume {name}"), e))?;
        Ok(vol)
    }

    /// Overwrites the first `bytes.len()` bytes of `vol` (a small volume
    /// rewritten in place: the fill lease's heartbeat).
    pub(crate) async fn overwrite_small(
        &self,
        vol: &StorageVol,
        bytes: &[u8],
    ) -> Result<(), ApiError> {
        observed(
            self.host,
            proc_num::STORAGE_VOL_UPLOAD,
            self.client.storage_vol_upload(
                vol,
                0,
                bytes.len() as u64,
                StorageVolStreamFlags::empty(),
                bytes,
            ),
        )
        .await
        .map(|_| ())
        .map_err(|e| self.err(format!("rewrite volume {}", vol.name), e))
    }

    /// Reads a small volume whole; `None` when it is larger than `limit`.
    pub(crate) async fn read_small(
        &self,
        vol: &StorageVol,
        limit: usize,
    ) -> Result<Option<Vec<u8>>, ApiError> {
        let size = self.physical(vol).await?;
        if usize::try_from(size).map_or(true, |s| s > limit) {
            return Ok(None);
        }
        let mut buf = Vec::new();
        observed(
            self.host,
            proc_num::STORAGE_VOL_DOWNLOAD,
            self.client
                .storage_vol_download(vol, 0, 0, StorageVolStreamFlags::empty(), &mut buf),
        )
        .await
        .map_err(|e| self.err(format!("read volume {}", vol.name), e))?;
        if buf.len() > limit {
            return Ok(None);
        }
        Ok(Some(buf))
    }
}
