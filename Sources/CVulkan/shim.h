/* Vulkan, loaded at run time (libvulkan.so.1), for one job: binary
 * semaphores that GL (GL_EXT_semaphore_fd) and CUDA (cuImportExternalSemaphore)
 * both import, so that GL's writes into memory CUDA reads are handed over as
 * GL_EXT_external_objects asks. Neither GL nor CUDA can make such a semaphore;
 * Vulkan makes it on the device whose UUID is CUDA's and exports it as opaque
 * file descriptors. Headers only at build time (libvulkan-dev). */
#ifndef DIPTYCH_VULKAN_SHIM_H
#define DIPTYCH_VULKAN_SHIM_H
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* An instance and a device on one physical device, and the calls used on them. */
typedef struct {
    void *lib;
    VkInstance instance;
    VkDevice device;
    PFN_vkDestroyInstance destroyInstance;
    PFN_vkDestroyDevice destroyDevice;
    PFN_vkCreateSemaphore createSemaphore;
    PFN_vkDestroySemaphore destroySemaphore;
    PFN_vkGetSemaphoreFdKHR getSemaphoreFd;
} diptych_vk;

static inline void diptych_vk_close(diptych_vk *vk) {
    if (vk->device && vk->destroyDevice) vk->destroyDevice(vk->device, NULL);
    if (vk->instance && vk->destroyInstance) vk->destroyInstance(vk->instance, NULL);
    if (vk->lib) dlclose(vk->lib);
    memset(vk, 0, sizeof *vk);
}

/* Opens Vulkan 1.1 on the physical device whose deviceUUID is `uuid` (16
 * bytes), with opaque-fd binary semaphores that can be exported. 0, or -1 with
 * `why` (256 bytes) naming what is missing. */
static inline int diptych_vk_open(diptych_vk *vk, const unsigned char *uuid, char *why) {
    memset(vk, 0, sizeof *vk);
#define DIPTYCH_VK_FAIL(...) do { snprintf(why, 256, __VA_ARGS__); diptych_vk_close(vk); return -1; } while (0)
    vk->lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!vk->lib) DIPTYCH_VK_FAIL("libvulkan.so.1 cannot be loaded");
    PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)dlsym(vk->lib, "vkGetInstanceProcAddr");
    if (!gipa) DIPTYCH_VK_FAIL("libvulkan.so.1 lacks vkGetInstanceProcAddr");
    PFN_vkCreateInstance createInstance = (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance");
    if (!createInstance) DIPTYCH_VK_FAIL("no vkCreateInstance");
    VkApplicationInfo ai = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "diptych", .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &ai};
    VkResult r = createInstance(&ii, NULL, &vk->instance);
    if (r != VK_SUCCESS) { vk->instance = NULL; DIPTYCH_VK_FAIL("vkCreateInstance (Vulkan 1.1): VkResult %d (no Vulkan driver for this GPU?)", (int)r); }
    vk->destroyInstance = (PFN_vkDestroyInstance)gipa(vk->instance, "vkDestroyInstance");
    PFN_vkEnumeratePhysicalDevices enumerate = (PFN_vkEnumeratePhysicalDevices)gipa(vk->instance, "vkEnumeratePhysicalDevices");
    PFN_vkGetPhysicalDeviceProperties2 properties = (PFN_vkGetPhysicalDeviceProperties2)gipa(vk->instance, "vkGetPhysicalDeviceProperties2");
    PFN_vkGetPhysicalDeviceExternalSemaphoreProperties semaphoreProperties =
        (PFN_vkGetPhysicalDeviceExternalSemaphoreProperties)gipa(vk->instance, "vkGetPhysicalDeviceExternalSemaphoreProperties");
    PFN_vkCreateDevice createDevice = (PFN_vkCreateDevice)gipa(vk->instance, "vkCreateDevice");
    PFN_vkGetDeviceProcAddr gdpa = (PFN_vkGetDeviceProcAddr)gipa(vk->instance, "vkGetDeviceProcAddr");
    if (!vk->destroyInstance || !enumerate || !properties || !semaphoreProperties || !createDevice || !gdpa)
        DIPTYCH_VK_FAIL("the Vulkan 1.1 instance lacks a core call");
    VkPhysicalDevice devices[16], chosen = VK_NULL_HANDLE;
    uint32_t n = 16;
    if ((r = enumerate(vk->instance, &n, devices)) < 0) DIPTYCH_VK_FAIL("vkEnumeratePhysicalDevices: VkResult %d", (int)r);
    for (uint32_t i = 0; i < n && chosen == VK_NULL_HANDLE; i++) {
        VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
        VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id};
        properties(devices[i], &p);
        if (!memcmp(id.deviceUUID, uuid, 16)) chosen = devices[i];
    }
    if (chosen == VK_NULL_HANDLE) DIPTYCH_VK_FAIL("none of Vulkan's %u devices is the CUDA device (device UUIDs differ)", n);
    VkPhysicalDeviceExternalSemaphoreInfo si = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_SEMAPHORE_INFO,
                                                .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkExternalSemaphoreProperties sp = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES};
    semaphoreProperties(chosen, &si, &sp);
    if (!(sp.externalSemaphoreFeatures & VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT))
        DIPTYCH_VK_FAIL("Vulkan cannot export binary semaphores as opaque file descriptors on this device");
    float priority = 1;
    const char *extensions[] = {VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME};
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = 0, .queueCount = 1,
                                  .pQueuePriorities = &priority};
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi,
                             .enabledExtensionCount = 1, .ppEnabledExtensionNames = extensions};
    if ((r = createDevice(chosen, &di, NULL, &vk->device)) != VK_SUCCESS) {
        vk->device = NULL;
        DIPTYCH_VK_FAIL("vkCreateDevice with %s: VkResult %d", VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME, (int)r);
    }
    vk->destroyDevice = (PFN_vkDestroyDevice)gdpa(vk->device, "vkDestroyDevice");
    vk->createSemaphore = (PFN_vkCreateSemaphore)gdpa(vk->device, "vkCreateSemaphore");
    vk->destroySemaphore = (PFN_vkDestroySemaphore)gdpa(vk->device, "vkDestroySemaphore");
    vk->getSemaphoreFd = (PFN_vkGetSemaphoreFdKHR)gdpa(vk->device, "vkGetSemaphoreFdKHR");
    if (!vk->destroyDevice || !vk->createSemaphore || !vk->destroySemaphore || !vk->getSemaphoreFd)
        DIPTYCH_VK_FAIL("the Vulkan device lacks vkCreateSemaphore / vkGetSemaphoreFdKHR");
#undef DIPTYCH_VK_FAIL
    return 0;
}

/* A binary semaphore exported twice as an opaque fd (each importer takes one).
 * The semaphore itself is kept (`*semaphore`) until diptych_vk_semaphore_free. 0, or -1 with `why`. */
static inline int diptych_vk_semaphore(diptych_vk *vk, void **semaphore, int *fds, char *why) {
    VkExportSemaphoreCreateInfo ei = {.sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO,
                                      .handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkSemaphoreCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ei};
    VkSemaphore s = VK_NULL_HANDLE;
    VkResult r = vk->createSemaphore(vk->device, &ci, NULL, &s);
    if (r != VK_SUCCESS) { snprintf(why, 256, "vkCreateSemaphore (exportable): VkResult %d", (int)r); return -1; }
    fds[0] = fds[1] = -1;
    for (int i = 0; i < 2; i++) {
        VkSemaphoreGetFdInfoKHR gi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR, .semaphore = s,
                                      .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
        if ((r = vk->getSemaphoreFd(vk->device, &gi, &fds[i])) != VK_SUCCESS) {
            snprintf(why, 256, "vkGetSemaphoreFdKHR: VkResult %d", (int)r);
            if (i == 1) close(fds[0]);
            vk->destroySemaphore(vk->device, s, NULL);
            return -1;
        }
    }
    *semaphore = (void *)s;
    return 0;
}

static inline void diptych_vk_semaphore_free(diptych_vk *vk, void *semaphore) {
    if (semaphore) vk->destroySemaphore(vk->device, (VkSemaphore)semaphore, NULL);
}
#endif
