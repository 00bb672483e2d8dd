//! Procedure numbers of the event registration calls and of the event
//! messages (`REMOTE_PROC_*`, checked against libvirt's
//! `src/remote/remote_protocol.x`), re-exported in [`crate::proc_num`].

macro_rules! numbers {
    ($($name:ident = $num:literal => $text:literal;)*) => {
        $(
            #[doc = concat!("`REMOTE_PROC_", stringify!($name), "`")]
            pub const $name: i32 = $num;
        )*

        /// The procedure's name for logs, `None` for a number this table
        /// does not list.
        pub(crate) fn name(procedure: i32) -> Option<&'static str> {
            Some(match procedure {
                $($name => $text,)*
                _ => return None,
            })
        }

        /// Every number of the table (for tests of the procedure table).
        #[cfg(test)]
        pub(crate) const ALL: &[i32] = &[$($name),*];
    };
}

numbers! {
    CONNECT_NETWORK_EVENT_REGISTER_ANY = 313 => "connect_network_event_register_any";
    CONNECT_NETWORK_EVENT_DEREGISTER_ANY = 314 => "connect_network_event_deregister_any";
    NETWORK_EVENT_LIFECYCLE = 315 => "network_event_lifecycle";
    CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY = 316 => "connect_domain_event_callback_register_any";
    CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY = 317 => "connect_domain_event_callback_deregister_any";
    DOMAIN_EVENT_CALLBACK_LIFECYCLE = 318 => "domain_event_callback_lifecycle";
    DOMAIN_EVENT_CALLBACK_REBOOT = 319 => "domain_event_callback_reboot";
    DOMAIN_EVENT_CALLBACK_RTC_CHANGE = 320 => "domain_event_callback_rtc_change";
    DOMAIN_EVENT_CALLBACK_WATCHDOG = 321 => "domain_event_callback_watchdog";
    DOMAIN_EVENT_CALLBACK_IO_ERROR = 322 => "domain_event_callback_io_error";
    DOMAIN_EVENT_CALLBACK_GRAPHICS = 323 => "domain_event_callback_graphics";
    DOMAIN_EVENT_CALLBACK_IO_ERROR_REASON = 324 => "domain_event_callback_io_error_reason";
    DOMAIN_EVENT_CALLBACK_CONTROL_ERROR = 325 => "domain_event_callback_control_error";
    DOMAIN_EVENT_CALLBACK_BLOCK_JOB = 326 => "domain_event_callback_block_job";
    DOMAIN_EVENT_CALLBACK_DISK_CHANGE = 327 => "domain_event_callback_disk_change";
    DOMAIN_EVENT_CALLBACK_TRAY_CHANGE = 328 => "domain_event_callback_tray_change";
    DOMAIN_EVENT_CALLBACK_PMWAKEUP = 329 => "domain_event_callback_pmwakeup";
    DOMAIN_EVENT_CALLBACK_PMSUSPEND = 330 => "domain_event_callback_pmsuspend";
    DOMAIN_EVENT_CALLBACK_BALLOON_CHANGE = 331 => "domain_event_callback_balloon_change";
    DOMAIN_EVENT_CALLBACK_PMSUSPEND_DISK = 332 => "domain_event_callback_pmsuspend_disk";
    DOMAIN_EVENT_CALLBACK_DEVICE_REMOVED = 333 => "domain_event_callback_device_removed";
    DOMAIN_EVENT_BLOCK_JOB_2 = 339 => "domain_event_block_job_2";
    DOMAIN_EVENT_CALLBACK_TUNABLE = 346 => "domain_event_callback_tunable";
    DOMAIN_EVENT_CALLBACK_AGENT_LIFECYCLE = 348 => "domain_event_callback_agent_lifecycle";
    DOMAIN_EVENT_CALLBACK_DEVICE_ADDED = 354 => "domain_event_callback_device_added";
    DOMAIN_EVENT_CALLBACK_MIGRATION_ITERATION = 359 => "domain_event_callback_migration_iteration";
    DOMAIN_EVENT_CALLBACK_JOB_COMPLETED = 363 => "domain_event_callback_job_completed";
    DOMAIN_EVENT_CALLBACK_DEVICE_REMOVAL_FAILED = 367 => "domain_event_callback_device_removal_failed";
    CONNECT_STORAGE_POOL_EVENT_REGISTER_ANY = 368 => "connect_storage_pool_event_register_any";
    CONNECT_STORAGE_POOL_EVENT_DEREGISTER_ANY = 369 => "connect_storage_pool_event_deregister_any";
    STORAGE_POOL_EVENT_LIFECYCLE = 370 => "storage_pool_event_lifecycle";
    STORAGE_POOL_EVENT_REFRESH = 373 => "storage_pool_event_refresh";
    CONNECT_NODE_DEVICE_EVENT_REGISTER_ANY = 374 => "connect_node_device_event_register_any";
    CONNECT_NODE_DEVICE_EVENT_DEREGISTER_ANY = 375 => "connect_node_device_event_deregister_any";
    NODE_DEVICE_EVENT_LIFECYCLE = 376 => "node_device_event_lifecycle";
    NODE_DEVICE_EVENT_UPDATE = 377 => "node_device_event_update";
    DOMAIN_EVENT_CALLBACK_METADATA_CHANGE = 379 => "domain_event_callback_metadata_change";
    CONNECT_SECRET_EVENT_REGISTER_ANY = 380 => "connect_secret_event_register_any";
    CONNECT_SECRET_EVENT_DEREGISTER_ANY = 381 => "connect_secret_event_deregister_any";
    SECRET_EVENT_LIFECYCLE = 382 => "secret_event_lifecycle";
    SECRET_EVENT_VALUE_CHANGED = 383 => "secret_event_value_changed";
    DOMAIN_EVENT_BLOCK_THRESHOLD = 385 => "domain_event_block_threshold";
    DOMAIN_EVENT_MEMORY_FAILURE = 423 => "domain_event_memory_failure";
    DOMAIN_EVENT_MEMORY_DEVICE_SIZE_CHANGE = 438 => "domain_event_memory_device_size_change";
    NETWORK_EVENT_CALLBACK_METADATA_CHANGE = 446 => "network_event_callback_metadata_change";
}
